"""The fine-tune's training set: one row per canonical text, each source labelling what it
knows and nothing else."""

from __future__ import annotations

from modelbuild import datasets
from modelbuild.harm_labels import HarmLine
from modelbuild.real_text import LabelledLine, RealText
from modelbuild.tuning_data import EN_TEXT_WEIGHT, chat_intent, training_examples

SEED = 20241202


def _task(task: str, labels: tuple[str, ...], rows: list[tuple[str, int]]) -> datasets.TaskData:
    return datasets.TaskData(
        task, labels, tuple(datasets.Example(t, y, "en", "x", False) for t, y in rows)
    )


def _train_line(prefix: str) -> str:
    """A text the seeded split keeps on the training side."""
    return next(
        f"{prefix} {i}" for i in range(1000) if not datasets.held_out(SEED, f"{prefix} {i}")
    )


def test_sources_merge_into_one_row_per_text() -> None:
    threat = _train_line("i will hurt you")
    tasks = {
        "sentiment": _task("sentiment", datasets.SENTIMENT, [("great game", 2)]),
        "intent": _task("intent", datasets.INTENT, [("great game", 0)]),
        "toxicity": _task("toxicity", datasets.TOXICITY, [("great game", 0), (threat, 1)]),
    }
    harms = [HarmLine(threat, "en", "threat", (0.0, 1.0, 0.0, 0.0, 0.0))]
    real = RealText(
        zh_train=("有货吗",),
        zh_held_out=("在吗",),
        en_train=("see you soon",),
        en_held_out=("ok",),
        movie_train=("where were you last night?", "i'll kill that damn dog."),
        movie_held_out=("who?",),
        sms_train=(LabelledLine("WIN A PRIZE now", 1, "k"), LabelledLine("see you soon", 0, "j")),
        insults=(LabelledLine("you idiot", 1, "i"),),
    )
    vetted = frozenset({"where were you last night?"})
    rows = {e.text: e for e in training_examples(tasks, harms, real, SEED, vetted)}
    assert (rows["great game"].sentiment, rows["great game"].intent) == (2, 0)
    assert rows["great game"].harms == (0.0,) * 5  # toxicity none
    assert rows[threat].toxicity == 1
    assert rows[threat].harms[1] == 1.0
    assert rows[threat].sentiment == -1
    zh = rows["有货吗"]
    assert (zh.intent, zh.toxicity, zh.harms) == (1, 0, (0.0,) * 5)
    assert rows["win a prize now"].intent == datasets.INTENT.index("spam")
    assert rows["win a prize now"].harms == (-1.0,) * 5
    assert "在吗" not in rows  # held-out lines stay out
    assert "ok" not in rows
    assert "you idiot" not in rows  # the insult comments are for the insult output alone
    assert rows["see you soon"].weight == EN_TEXT_WEIGHT
    assert rows["great game"].weight == zh.weight == 1.0
    clean = rows["where were you last night?"]
    assert (clean.intent, clean.toxicity, clean.harms) == (1, 0, (0.0,) * 5)
    unvetted = rows["i'll kill that damn dog."]  # the teachers did not call it clean
    assert (unvetted.intent, unvetted.toxicity, unvetted.harms) == (0, -1, (-1.0,) * 5)
    assert "who?" not in rows


def test_chat_intent_reads_questions_in_both_languages() -> None:
    assert chat_intent("when does it ship?") == datasets.INTENT.index("question")
    assert chat_intent("有优惠吗") == datasets.INTENT.index("question")
    assert chat_intent("好的谢谢") == datasets.INTENT.index("chat")
