"""The adversarial dev set: hand-written seeds, expanded by the disguise transforms.

``python -m modelbuild.devset`` rewrites ``modelbuild/data/adversarial_dev.jsonl`` from
``modelbuild/data/devset_seeds.txt``; the output depends only on the seed file and the pinned
``pypinyin`` and ``opencc`` data (a unit test checks that the committed file is what this
produces).

Sources: every seed line, hand-made disguise and hard benign line was written by the modstream
team for this file; the generated lines are those seeds run through :mod:`modelbuild.disguise`.
No line is taken from a public dataset.

Each plain harmful seed gives itself (``form = "plain"``) and ``DISGUISES_PER_SEED`` disguised
forms (``form = "disguised"``, ``source = "generated"``), the transforms dealt round-robin over
the seeds of a language so that every transform gets about the same number of lines (a
transform that cannot change a line passes to the next one). Each transform draws from its own
``random.Random`` seeded with the line, so editing one seed changes only its own lines and the
deal of the seeds after it.

Fields of a line: ``text``, ``lang`` (en, zh), ``label`` (harmful, benign), ``category`` (hate,
harassment, threat, self_harm, sexual, spam; for benign lines the category they could be
mistaken for), ``form`` (plain, disguised, benign_hard), ``transform`` (``none`` or the trick),
``source`` (hand_written, generated), ``topic`` (why a benign line is hard; empty otherwise) and
``seed`` (the plain line a generated disguise was made from; empty otherwise).
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from modelbuild.disguise import apply_transform, transforms_for

__all__ = [
    "CATEGORIES",
    "DEVSET_PATH",
    "DISGUISES_PER_SEED",
    "FORMS",
    "SEEDS_PATH",
    "DevExample",
    "Seed",
    "SeedFileError",
    "build_devset",
    "main",
    "parse_seeds",
    "read_devset",
    "to_jsonl",
]

DATA_DIR = Path(__file__).resolve().parent / "data"
SEEDS_PATH = DATA_DIR / "devset_seeds.txt"
DEVSET_PATH = DATA_DIR / "adversarial_dev.jsonl"
DISGUISES_PER_SEED = 4
GENERATOR_SEED = "modstream-devset-1"
CATEGORIES: tuple[str, ...] = ("hate", "harassment", "threat", "self_harm", "sexual", "spam")
FORMS: tuple[str, ...] = ("plain", "disguised", "benign_hard")
LANGS: tuple[str, ...] = ("en", "zh")
_TARGET = re.compile(r"\[([^\[\]]+)\]")


@dataclass(frozen=True, slots=True)
class Seed:
    """One line of the seed file, with the header that applies to it."""

    text: str
    """The line with the ``[target]`` brackets removed."""
    targets: tuple[str, ...]
    lang: str
    category: str
    form: str
    extra: str
    """The trick of a hand-made disguise, or the topic of a benign line; empty for plain."""


@dataclass(frozen=True, slots=True)
class DevExample:
    """One line of the dev set."""

    text: str
    lang: str
    label: str
    category: str
    form: str
    transform: str
    source: str
    topic: str = ""
    seed: str = ""
    """For a generated disguise, the plain line it was made from; empty otherwise."""

    @property
    def harmful(self) -> bool:
        return self.label == "harmful"


class SeedFileError(ValueError):
    """The seed file breaks its format (unknown form, language or category, stray line)."""


def parse_seeds(text: str) -> list[Seed]:
    """The seeds of a seed file, in file order."""
    seeds: list[Seed] = []
    header: tuple[str, str, str, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            header = _header(line, number)
            continue
        if header is None:
            raise SeedFileError(f"line {number}: a seed before any @ header")
        form, lang, category, extra = header
        targets = tuple(_TARGET.findall(line))
        if targets and form != "plain":
            raise SeedFileError(f"line {number}: only plain seeds mark [targets]")
        seeds.append(Seed(_TARGET.sub(r"\1", line), targets, lang, category, form, extra))
    return seeds


def _header(line: str, number: int) -> tuple[str, str, str, str]:
    parts = line[1:].split()
    if len(parts) not in (3, 4):
        raise SeedFileError(f"line {number}: a header is '@ FORM LANG CATEGORY [EXTRA]'")
    form, lang, category = parts[:3]
    extra = parts[3] if len(parts) == 4 else ""
    if form not in FORMS or lang not in LANGS or category not in CATEGORIES:
        raise SeedFileError(f"line {number}: unknown form, language or category")
    if (form == "plain") == bool(extra):
        raise SeedFileError(f"line {number}: plain headers have no EXTRA, the others need one")
    return form, lang, category, extra


def build_devset(seeds: Iterable[Seed]) -> list[DevExample]:
    """The dev set's lines: each seed, followed by its generated disguises when it is plain."""
    out: list[DevExample] = []
    dealt = dict.fromkeys(LANGS, 0)
    for seed in seeds:
        if seed.form == "benign_hard":
            out.append(_example(seed, "benign", "none", "hand_written", seed.extra))
        elif seed.form == "disguised":
            out.append(_example(seed, "harmful", seed.extra, "hand_written"))
        else:
            out.append(_example(seed, "harmful", "none", "hand_written"))
            names = transforms_for(seed.lang)
            start = dealt[seed.lang] * DISGUISES_PER_SEED
            dealt[seed.lang] += 1
            made = 0
            for step in range(len(names)):
                if made == DISGUISES_PER_SEED:
                    break
                name = names[(start + step) % len(names)]
                rng = random.Random(f"{GENERATOR_SEED}|{seed.lang}|{seed.text}|{name}")
                text = apply_transform(name, seed.text, seed.lang, rng, targets=seed.targets)
                if text is None:
                    continue
                out.append(
                    DevExample(
                        text,
                        seed.lang,
                        "harmful",
                        seed.category,
                        "disguised",
                        name,
                        "generated",
                        seed=seed.text,
                    )
                )
                made += 1
    return out


def _example(seed: Seed, label: str, transform: str, source: str, topic: str = "") -> DevExample:
    form = "benign_hard" if label == "benign" else seed.form
    return DevExample(seed.text, seed.lang, label, seed.category, form, transform, source, topic)


def to_jsonl(examples: Iterable[DevExample]) -> str:
    """One JSON object per line, keys in field order, non-ASCII kept as is."""
    return "".join(json.dumps(asdict(e), ensure_ascii=False) + "\n" for e in examples)


def read_devset(path: Path = DEVSET_PATH) -> list[DevExample]:
    """The committed dev set."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [DevExample(**json.loads(line)) for line in lines if line.strip()]


def main(argv: list[str] | None = None) -> int:
    """Regenerate the dev set file from the seed file; prints the line counts."""
    del argv
    examples = build_devset(parse_seeds(SEEDS_PATH.read_text(encoding="utf-8")))
    DEVSET_PATH.write_text(to_jsonl(examples), encoding="utf-8")
    counts: dict[str, int] = {}
    for e in examples:
        key = f"{e.lang}/{e.form}"
        counts[key] = counts.get(key, 0) + 1
    print(
        f"{DEVSET_PATH.name}: {len(examples)} lines "
        + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
