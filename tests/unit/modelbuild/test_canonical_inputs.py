"""The heads' input text: canonical, idempotent, labels and splits kept."""

from __future__ import annotations

from modelbuild.augment import disguised_forms
from modelbuild.canonical_inputs import canonical_task, canonical_text
from modelbuild.datasets import TOXICITY, Example, TaskData
from modelbuild.training_data import template_lines

_LINES = (
    "ＦＲＥＥ  Followers!!!",
    "Ｙｏｕ are a m0r0n",
    "f u c k off",
    "你這個廢物",
    "傻 逼",
    "ᴍᴏʀᴏɴ",
    "caf\u0301e",
)


def test_canonicalising_twice_changes_nothing() -> None:
    """canonicalize is idempotent on chat, hard negatives and disguised forms, so the model
    may receive text that was canonicalised already."""
    lines = list(_LINES) + [n.text for n in template_lines("hard_negatives", 3, per_family=15)]
    lines += [
        f
        for t in ("you stupid moron", "你这个废物")
        for f, _ in disguised_forms(
            t, "zh" if not t.isascii() else "en", 3, lambda x: x, per_example=20
        )
    ]
    for line in lines:
        once = canonical_text(line)
        assert canonical_text(once) == once, line


def test_canonical_text_folds_case_width_and_script() -> None:
    """Case, full-width letters and Traditional characters are folded (the model's input)."""
    assert canonical_text("ＦＲＥＥ  Followers") == "free followers"
    assert canonical_text("你這個廢物") == "你这个废物"


def test_canonical_task_keeps_labels_and_drops_empty_texts() -> None:
    """Labels, languages, sources and splits are kept; a text that canonicalises to nothing
    is dropped."""
    data = TaskData(
        "toxicity",
        TOXICITY,
        (
            Example("YOU Moron", 1, "en", "s", True),
            Example("\u200b", 0, "en", "s", False),
        ),
    )
    assert canonical_task(data).examples == (Example("you moron", 1, "en", "s", True),)
