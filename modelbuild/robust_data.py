"""A task's training and evaluation examples made robust: canonical text, hard benign
negatives and disguised forms of its harmful examples.

For every task the texts are canonicalised (:mod:`modelbuild.canonical_inputs`), because the
model is served canonical text. For intent and toxicity the lines of the hand-written family
files (``modelbuild/data/training/*.toml``, :mod:`modelbuild.training_data`) are added, with
the usual seeded 20 % held out, so the held-out split also measures them:

- the hard benign negatives (``hard_negatives.toml``) and the benign twins of the abuse
  families (``counterfactuals.toml``), labelled toxicity ``none`` and intent ``chat``
  (``question`` when the line ends with a question mark);
- for toxicity, the threats and self-harm incitement (``threats.toml``) and the insults, hate
  and sexual harassment (``abuse.toml``), labelled as their family says;
- for intent, the chat-length scams (``spam.toml``), labelled ``spam``;
- the written lines (``written/*.toml``, :mod:`modelbuild.written_lines`): benign ones as
  toxicity ``none`` and intent ``chat`` / ``question`` (weighted like the hard negatives);
  offensive and hate ones for toxicity (intent ``chat`` / ``question``: abuse is not an ad),
  spam and advertisement ones for intent;
- the disguised forms of the harmful training examples, threats included
  (:mod:`modelbuild.augment`), with the label of their plain line, training split only.
"""

from __future__ import annotations

from collections.abc import Sequence

from modelbuild import datasets
from modelbuild.augment import disguised_examples
from modelbuild.canonical_inputs import canonical_task, canonical_text
from modelbuild.template_families import TemplateLine
from modelbuild.training_data import lexicon_templates, template_lines
from modelbuild.written_lines import written_lines

__all__ = [
    "ABUSE_SOURCE",
    "HARD_NEGATIVE_SOURCE",
    "HARMFUL",
    "SPAM_SOURCE",
    "THREAT_SOURCE",
    "WRITTEN_SOURCE",
    "robust_task",
]

HARMFUL: dict[str, tuple[str, ...]] = {
    "intent": ("spam", "advertisement"),
    "toxicity": ("offensive", "hate"),
}
"""The classes whose training examples are also given in disguised forms."""
HARD_NEGATIVE_SOURCE = "hard-negative"
THREAT_SOURCE = "template-threat"
ABUSE_SOURCE = "template-abuse"
SPAM_SOURCE = "template-spam"
WRITTEN_SOURCE = "written"


def _chat_label(task: str, text: str) -> int:
    """Toxicity ``none``, or intent ``chat`` (``question`` when ``text`` asks)."""
    if task == "intent" and datasets.is_question(text):
        return datasets.INTENT.index("question")
    return 0


def _hard_negative_examples(task: str, seed: int) -> list[datasets.Example]:
    benign = template_lines("hard_negatives", seed) + template_lines("counterfactuals", seed)
    benign += [line for line in written_lines() if line.label == "benign"]
    return [
        datasets.Example(
            line.text,
            _chat_label(task, line.text),
            line.lang,
            HARD_NEGATIVE_SOURCE,
            datasets.held_out(seed, line.text),
        )
        for line in benign
    ]


def _written_examples(task: str, seed: int) -> list[datasets.Example]:
    """The harmful written lines a task learns: toxicity its labels, intent the ads and spam
    (and the abuse lines as chat, which they are to intent)."""
    labels = datasets.TOXICITY if task == "toxicity" else datasets.INTENT
    out = []
    for line in written_lines():
        if line.label == "benign" or (task == "toxicity" and line.label not in labels):
            continue
        label = labels.index(line.label) if line.label in labels else _chat_label(task, line.text)
        test = datasets.held_out(seed, line.text)
        out.append(datasets.Example(line.text, label, line.lang, WRITTEN_SOURCE, test))
    return out


def _labelled(
    lines: list[TemplateLine], labels: tuple[str, ...], source: str, seed: int
) -> list[datasets.Example]:
    """Template lines as examples labelled as their family says (``labels`` are the task's
    classes), the usual seeded 20 % held out."""
    return [
        datasets.Example(
            line.text,
            labels.index(line.label),
            line.lang,
            source,
            datasets.held_out(seed, line.text),
        )
        for line in lines
    ]


def _threat_examples(seed: int) -> list[datasets.Example]:
    return _labelled(template_lines("threats", seed), datasets.TOXICITY, THREAT_SOURCE, seed)


def _abuse_examples(seed: int) -> list[datasets.Example]:
    return _labelled(template_lines("abuse", seed), datasets.TOXICITY, ABUSE_SOURCE, seed)


def _spam_examples(seed: int) -> list[datasets.Example]:
    return _labelled(template_lines("spam", seed), datasets.INTENT, SPAM_SOURCE, seed)


def robust_task(
    data: datasets.TaskData, lexicons: dict[str, list[str]], seed: int
) -> datasets.TaskData:
    """``data`` canonicalised; for intent and toxicity with the hard negatives and the
    disguised harmful training examples added. ``lexicons`` is
    :func:`modelbuild.datasets.load_lexicons`' result: its words are what gets disguised."""
    if data.task not in HARMFUL:
        return canonical_task(data)
    added = _threat_examples(seed) + _abuse_examples(seed) if data.task == "toxicity" else []
    if data.task == "intent":
        added = _spam_examples(seed)
    added += _written_examples(data.task, seed)
    data = datasets.TaskData(data.task, data.labels, data.examples + tuple(added))
    canonical = canonical_task(data)
    extra = datasets.TaskData(
        data.task, data.labels, tuple(_hard_negative_examples(data.task, seed))
    )
    harmful = frozenset(data.labels.index(name) for name in HARMFUL[data.task])
    targets: dict[str, Sequence[str]] = (
        {"en": lexicon_templates().ad_products["en"], "zh": lexicons["zh_ads"]}
        if data.task == "intent"
        else {"en": lexicons["en"], "zh": lexicons["zh"]}
    )
    disguised = disguised_examples(data.examples, harmful, seed, canonical_text, lexicons=targets)
    return datasets.TaskData(
        data.task,
        data.labels,
        canonical.examples + canonical_task(extra).examples + tuple(disguised),
    )
