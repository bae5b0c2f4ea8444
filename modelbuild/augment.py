"""Seeded disguise augmentation of harmful training examples.

Each harmful *training* example (toxicity offensive / hate, intent spam / advertisement; never a
held-out one) is also given in up to ``per_example`` disguised forms made by
:mod:`modelbuild.disguise`, then canonicalised as the worker canonicalises before scoring
(:mod:`modelbuild.canonical_inputs`). A disguise the canonicaliser undoes (full-width or
mathematical letters, zero-width characters, letters split by spaces, Traditional characters,
look-alike letters, alternating case) would only repeat the plain line, so only forms whose
canonical text differs from the plain line's (and from each other) are kept: leet, masks,
pinyin, pinyin initials, homophones, emoji words and what survives of the others.

What is disguised is what people disguise: the lexicon words found in the line (the insult, the
ad word), else one or two of its words (English) or a two-character piece of a Chinese run.
The transforms, their order and the targets are drawn from a generator seeded by
``seed:text``, so an example's forms do not depend on the order of the others.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from modelbuild.datasets import Example
from modelbuild.disguise import apply_transform, transforms_for

__all__ = ["MAX_CHARS", "disguised_examples", "disguised_forms"]

MAX_CHARS = 160
"""Longer examples (e-mail snippets) are not disguised: chat disguises short lines."""
_EN_WORD = re.compile(r"[A-Za-z]{3,}")
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")

Canonical = Callable[[str], str]


def _targets(text: str, lang: str, lexicon: Sequence[str], rng: random.Random) -> list[str]:
    found = sorted({w for w in lexicon if len(w) >= 2 and w in text}, key=lambda w: (-len(w), w))
    if found:
        return found[:2]
    if lang == "en":
        words = sorted(set(_EN_WORD.findall(text)))
        return rng.sample(words, min(len(words), rng.choice((1, 2))))
    runs = _HAN_RUN.findall(text)
    if not runs:
        return []
    run = rng.choice(runs)
    start = rng.randrange(len(run) - 1)
    return [run[start : start + 2]]


def disguised_forms(
    text: str,
    lang: str,
    seed: int,
    canonical: Canonical,
    *,
    lexicon: Sequence[str] = (),
    per_example: int = 2,
) -> list[tuple[str, str]]:
    """Up to ``per_example`` ``(canonical disguised text, transform)`` pairs for ``text``, each
    different from the canonical plain text and from the others."""
    rng = random.Random(f"{seed}:{lang}:{text}")
    targets = _targets(text, lang, lexicon, rng)
    names = list(transforms_for(lang))
    rng.shuffle(names)
    seen = {canonical(text)}
    out: list[tuple[str, str]] = []
    for name in names:
        changed = apply_transform(name, text, lang, rng, targets=targets)
        if changed is None:
            continue
        form = canonical(changed)
        if form not in seen:
            seen.add(form)
            out.append((form, name))
            if len(out) == per_example:
                break
    return out


def disguised_examples(
    examples: Iterable[Example],
    harmful: frozenset[int],
    seed: int,
    canonical: Canonical,
    *,
    lexicons: Mapping[str, Sequence[str]],
    per_example: int = 2,
    limit_per_lang: int = 1500,
) -> list[Example]:
    """Disguised forms of the harmful training examples (at most ``limit_per_lang`` lines per
    language), labelled as their plain line, source ``augment-<transform>``."""
    out: list[Example] = []
    counts: dict[str, int] = {}
    candidates = sorted(
        (e for e in examples if e.label in harmful and not e.test and len(e.text) <= MAX_CHARS),
        key=lambda e: (random.Random(f"{seed}:order:{e.text}").random(), e.text),
    )
    for example in candidates:
        if counts.get(example.lang, 0) >= limit_per_lang:
            continue
        forms = disguised_forms(
            example.text,
            example.lang,
            seed,
            canonical,
            lexicon=lexicons.get(example.lang, ()),
            per_example=per_example,
        )
        for form, name in forms[: limit_per_lang - counts.get(example.lang, 0)]:
            out.append(Example(form, example.label, example.lang, f"augment-{name}", False))
            counts[example.lang] = counts.get(example.lang, 0) + 1
    return out
