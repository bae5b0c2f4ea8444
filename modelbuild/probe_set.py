"""``python -m modelbuild.probe_set [--probe l..x]``: the whole decision on a probe set, lines
no build was tuned to.

``modelbuild/data/probe_<l..x>.toml`` (their provenance and layout are inside them) hold harmful
lines per language and category, plain and disguised by hand, and everyday lines: plain chat, game
banter, reports of received abuse and ordinary senses of profane words. Probe L was written by the
fourth issue-20 session (read since); probe M by writers that never saw the repository, for the
fifth (read since its final measurement); probe N likewise for the sixth and probe O for the seventh
(both read since), probes P and Q for the eighth (read after their end gradings), probe R for the
ninth and probe S for the tenth (both read since their end gradings), probes T and U for the
eleventh (T read after its end grading; U, written after the rules that reading gave, read by
the twelfth), probes V and W for the twelfth (V read after its end grading; W, written after
the rules that reading gave, read by the thirteenth), probe X for the thirteenth (graded at its
start and end; the default: the newest of :data:`PROBES`). Each line takes
the worker's path (:func:`modelbuild.whole_decision.decide_texts`: decode, rules, the served
``moderation`` model's code in process, the policy with default thresholds) and is graded as the
dev set is
(:mod:`modelbuild.decision_grading`): caught = flag or block; an everyday line is a false positive
when it is flagged, blocked or escalated.

A probe measures; it is never trained on (unit tests check no training line equals a probe
line). Each was measured at the start and at the end of the session that wrote it; read its
misses and it stops being a clean measure.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from modelbuild.devset import CATEGORIES, DevExample
from pipelines.data_files import DataFileError, read_data_file, strings, table

__all__ = ["EVERYDAY", "EVERYDAY_SUBSETS", "PROBES", "main", "probe_lines", "probe_report"]

EVERYDAY = "everyday"
"""The category of the everyday lines."""
EVERYDAY_SUBSETS = ("plain", "game", "report", "ordinary_sense")
PROBES = (
    "probe_l",
    "probe_m",
    "probe_n",
    "probe_o",
    "probe_p",
    "probe_q",
    "probe_r",
    "probe_s",
    "probe_t",
    "probe_u",
    "probe_v",
    "probe_w",
    "probe_x",
)
"""The probe files of ``modelbuild/data/``, oldest first."""
_LANGS = ("en", "zh")
_HARMFUL_FORMS = ("plain", "disguised")


@functools.cache
def probe_lines(name: str = "probe_l") -> tuple[DevExample, ...]:
    """A probe's lines (``name`` one of :data:`PROBES`) as dev-set lines: harmful ones with their
    category and form (``plain``, ``disguised``), everyday ones with category ``everyday``, form
    ``benign_hard`` and their subset as topic."""
    if name not in PROBES:
        raise KeyError(f"{name!r} is not a probe; they are {list(PROBES)}")
    data = read_data_file(resources.files("modelbuild").joinpath("data", f"{name}.toml"))
    out: list[DevExample] = []
    for lang in _LANGS:
        section = table(data.name, data.body, lang)
        harmful = table(data.name, section, "harmful")
        if set(harmful) != set(CATEGORIES):
            raise DataFileError(data.name, f"{lang}.harmful must have exactly {list(CATEGORIES)}")
        for category in CATEGORIES:
            forms = table(data.name, harmful, category)
            if set(forms) != set(_HARMFUL_FORMS):
                raise DataFileError(data.name, f"{lang}.harmful.{category}: forms {_HARMFUL_FORMS}")
            for form in _HARMFUL_FORMS:
                where = f"{lang}.harmful.{category}.{form}"
                for text in strings(data.name, forms[form], where):
                    transform = "none" if form == "plain" else "hand"
                    out.append(DevExample(text, lang, "harmful", category, form, transform, name))
        everyday = table(data.name, section, EVERYDAY)
        if set(everyday) != set(EVERYDAY_SUBSETS):
            raise DataFileError(data.name, f"{lang}.everyday must have {list(EVERYDAY_SUBSETS)}")
        for subset in EVERYDAY_SUBSETS:
            for text in strings(data.name, everyday[subset], f"{lang}.everyday.{subset}"):
                out.append(
                    DevExample(text, lang, "benign", EVERYDAY, "benign_hard", "none", name, subset)
                )
    return tuple(out)


def probe_report(
    repository: Path, name: str = "probe_l", model: str = "moderation"
) -> dict[str, Any]:
    """Probe ``name`` graded with ``model`` of ``repository`` (see the module docstring)."""
    from modelbuild.evaluate import grade_devset
    from modelbuild.whole_decision import served_scorer

    return grade_devset(served_scorer(repository, model), list(probe_lines(name)))


def _lines(report: dict[str, Any], name: str) -> list[str]:
    from modelbuild.decision_grading import format_grading

    out = [line.replace("devset   ", f"{name}  ", 1) for line in format_grading(report)]
    headline = report["headline"]
    out.append(
        " ".join(f"{name}_{k.replace('benign', 'everyday')}={v:.4f}" for k, v in headline.items())
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from common.settings import project_root

    parser = argparse.ArgumentParser(prog="python -m modelbuild.probe_set", description=__doc__)
    parser.add_argument(
        "--repository",
        type=Path,
        default=None,
        help="the built model repository (default: the project's model_repository/)",
    )
    letters = [p.removeprefix("probe_") for p in PROBES]
    parser.add_argument(
        "--probe",
        choices=letters,
        default=letters[-1],
        help=f"which probe set (default: {letters[-1]}, the newest)",
    )
    parser.add_argument(
        "--model",
        default="moderation",
        help="which moderation model decides (default: moderation; moderation_v2 is the previous)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    name = f"probe_{args.probe}"
    report = probe_report(args.repository or project_root() / "model_repository", name, args.model)
    print("\n".join(_lines(report, name)))
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
