"""The fine-tune's training set: every task's training examples, the harm labels and real text,
merged into one row per (canonical) text.

Sources and what they label (-1 = the source says nothing about that task):

============================  =========  ==========  ==========  ===========================
source                        sentiment  intent      toxicity    harms
============================  =========  ==========  ==========  ===========================
task examples (training side  its own    its own     its own     0 where toxicity is none
of :func:`load_task_data`)
written and template lines    -1         -1          -1          :mod:`modelbuild.harm_labels`
(training side)
real everyday lines (Chinese  -1         chat or     none        0
dialogues, English texts)                question
film dialogue lines the       -1         chat or     none        0
teachers call clean                      question
other film dialogue lines     -1         chat or     -1          -1
                                         question
real spam texts               -1         spam        -1          -1
============================  =========  ==========  ==========  ===========================

Real English text messages weigh :data:`EN_TEXT_WEIGHT` in the fine-tune's loss and the heads'
fits: they are the closest thing to chat between people that ships, and the fewest.

The insult comments of ``train.csv`` are not here: they train and cross-validate the insult
output over the tuned encoder (:mod:`modelbuild.train`), which must not have seen them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from modelbuild import datasets
from modelbuild.canonical_inputs import canonical_text
from modelbuild.finetune import TrainExample
from modelbuild.harm_labels import HARMS, HarmLine
from modelbuild.real_text import RealText

__all__ = ["EN_TEXT_WEIGHT", "TASKS", "chat_intent", "training_examples"]

TASKS: dict[str, tuple[str, ...]] = {
    "sentiment": datasets.SENTIMENT,
    "intent": datasets.INTENT,
    "toxicity": datasets.TOXICITY,
}
EN_TEXT_WEIGHT = 3.0
"""The weight of a real English text message (every other row weighs 1)."""
_ZH_QUESTION_ENDINGS = ("吗", "么", "呢", "吧?", "没有", "不")
_UNKNOWN_HARMS = tuple(-1.0 for _ in HARMS)
_NO_HARMS = tuple(0.0 for _ in HARMS)


def chat_intent(text: str) -> int:
    """Intent ``question`` for a line that asks (a question mark, or a Chinese question
    particle at the end), ``chat`` otherwise."""
    stripped = text.rstrip(" ~～。.!！")
    if datasets.is_question(text) or stripped.endswith(_ZH_QUESTION_ENDINGS):
        return datasets.INTENT.index("question")
    return datasets.INTENT.index("chat")


@dataclass(slots=True)
class _Row:
    labels: dict[str, int] = field(default_factory=dict)
    harms: tuple[float, ...] = _UNKNOWN_HARMS
    weight: float = 1.0

    def set(self, task: str, label: int) -> None:
        self.labels.setdefault(task, label)

    def set_harms(self, harms: tuple[float, ...]) -> None:
        if self.harms == _UNKNOWN_HARMS:
            self.harms = harms


def training_examples(
    tasks: dict[str, datasets.TaskData],
    harm_lines: Iterable[HarmLine],
    real: RealText,
    seed: int,
    vetted: Collection[str] = frozenset(),
) -> list[TrainExample]:
    """One example per distinct canonical text, in a fixed order (first seen first).
    ``vetted`` holds the film dialogue lines (as in ``real.movie_train``) that the teachers
    call clean (:func:`modelbuild.teacher.clean_lines`)."""
    rows: dict[str, _Row] = {}

    def row(text: str) -> _Row:
        return rows.setdefault(text, _Row())

    for task in TASKS:
        for example in tasks[task].split(test=False):
            target = row(example.text)
            target.set(task, example.label)
            if task == "toxicity" and example.label == 0:
                target.set_harms(_NO_HARMS)
    for line in harm_lines:
        if datasets.held_out(seed, line.text):
            continue
        row(canonical_text(line.text)).set_harms(line.labels)
    for text in (*real.zh_train, *real.en_train):
        canonical = canonical_text(text)
        target = row(canonical)
        target.set("intent", chat_intent(canonical))
        target.set("toxicity", 0)
        target.set_harms(_NO_HARMS)
    for text in real.en_train:
        row(canonical_text(text)).weight = EN_TEXT_WEIGHT
    for text in real.movie_train:
        canonical = canonical_text(text)
        target = row(canonical)
        target.set("intent", chat_intent(canonical))
        if text in vetted:
            target.set("toxicity", 0)
            target.set_harms(_NO_HARMS)
    for message in real.sms_train:
        if message.label == 1:
            row(canonical_text(message.text)).set("intent", datasets.INTENT.index("spam"))
    return [
        TrainExample(
            text,
            r.labels.get("sentiment", -1),
            r.labels.get("intent", -1),
            r.labels.get("toxicity", -1),
            r.harms,
            r.weight,
        )
        for text, r in rows.items()
        if text.strip()
    ]
