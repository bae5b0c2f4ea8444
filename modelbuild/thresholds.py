"""``python -m modelbuild.thresholds``: the policy's per-category flag thresholds, chosen on the
dev set.

The policy flags a message when a model probability reaches its category's threshold
(``flag_offensive`` on ``1 - P(none)``, ``flag_hate`` on ``P(hate)``, ``flag_spam``,
``flag_advertisement``; ``pipelines.policy.PolicyThresholds``). This sweeps every combination
of those four over a grid and grades each with the whole decision (rules, the served model, the
policy) on two sets the build never trains on:

- the adversarial dev set's harmful lines, plain and disguised (what is caught: flag or block);
- the everyday lines (what is flagged, blocked or escalated): the dev set's hard benign lines,
  the held-out chatterbot-corpus chat lines and the held-out fifth of the hand-written benign
  families (``hard_negatives.toml``, ``counterfactuals.toml``: reports quoting abuse, game
  banter, ordinary senses of profane words, ...; generated from the same templates as their
  training lines, so they show a threshold's cost on tricky lines rather than measure it) and of
  the written everyday lines (``written/*_everyday.toml``: plain chat, game banter, reports,
  ordinary senses, by the same writers as their training lines).

``--with-probes l,m,n,o,p`` adds read probes' lines (``modelbuild/data/probe_*.toml``, harmful
and everyday) to both sets: the dev set alone no longer separates candidates that differ on a
few lines. Only probes already read belong there; the newest probe measures.

No flag threshold below 0.40 is considered: too few everyday lines to see what it would cost.

Rules and model run once; each combination is then a vectorised copy of the policy's flag rule
(checked against ``policy.decide`` for the chosen one). The chosen thresholds catch the most
harmful lines while flagging at most ``--max-everyday-fpr`` of the everyday lines (default:
as many as the current defaults flag; ties: the fewest everyday lines flagged, then the highest
thresholds). The grey zone starts at the flag threshold (``escalate_low = flag_offensive``), as
the policy's defaults have it.

It prints the current defaults' figures, the chosen thresholds' and, per category, how catch and
false positives move with that category's threshold alone.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from modelbuild import datasets
from modelbuild.build import SEED
from modelbuild.decision_grading import is_caught, is_false_positive
from modelbuild.devset import read_devset
from modelbuild.probe_set import PROBES, probe_lines
from modelbuild.settings import ModelToolSettings
from modelbuild.sources import fetch_all
from modelbuild.training_data import template_lines
from modelbuild.whole_decision import Scorer, outcomes_and_scores, served_scorer
from modelbuild.written_lines import written_lines
from pipelines.policy import PolicyConfigError, PolicyThresholds, decide
from pipelines.rule_hits import RuleAction, RuleOutcome, Severity
from pipelines.scores import ModelScores
from pipelines.severe_harm import is_severe

__all__ = ["GRID", "Choice", "Lines", "choose", "main", "probe_rows", "sweep_lines"]

GRID = tuple(round(0.40 + 0.05 * i, 2) for i in range(11))
"""Candidate values of every flag threshold: 0.40 to 0.90."""
Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Lines:
    """What the policy sees of each graded line, as arrays (one entry per line)."""

    harmful: Bools
    rule_caught: Bools
    """A block rule or a flag rule the model cannot clear hit it."""
    rule_clearable: Bools
    """Only flag rules marked ``yields_to_model`` hit it (the model may clear them)."""
    rule_escalates: Bools
    """A rule hit escalates it (escalate action, critical severity or a severe category)."""
    toxic: Floats
    hate: Floats
    spam: Floats
    ad: Floats
    """Model probabilities; 0 where the model is not asked (a rule blocked the line)."""
    scored: Bools
    """The model was asked."""
    lang: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Choice:
    """Thresholds and what they give on the graded lines."""

    thresholds: PolicyThresholds
    catch: float
    everyday_fpr: float
    harmful: int
    everyday: int
    by_lang: dict[str, tuple[float, float]]
    """Per language: (catch, everyday false-positive rate)."""


def _rule_escalates(outcome: RuleOutcome) -> bool:
    return any(
        hit.action is RuleAction.ESCALATE
        or hit.severity is Severity.CRITICAL
        or is_severe(hit.category)
        for hit in outcome.hits
    )


def sweep_lines(
    texts: Sequence[str], harmful: Sequence[bool], langs: Sequence[str], scorer: Scorer
) -> tuple[Lines, list[tuple[RuleOutcome | None, ModelScores | None]]]:
    """Rules and model for every line, once."""
    decided = outcomes_and_scores(texts, scorer)
    n = len(decided)
    arrays = {k: np.zeros(n) for k in ("toxic", "hate", "spam", "ad")}
    rule_caught = np.zeros(n, dtype=bool)
    rule_clearable = np.zeros(n, dtype=bool)
    scored = np.zeros(n, dtype=bool)
    rule_escalates = np.zeros(n, dtype=bool)
    for i, (outcome, scores) in enumerate(decided):
        if outcome is None:
            continue
        rule_caught[i] = any(
            h.action is RuleAction.BLOCK or (h.action is RuleAction.FLAG and not h.yields_to_model)
            for h in outcome.hits
        )
        rule_clearable[i] = not rule_caught[i] and any(
            h.action is RuleAction.FLAG for h in outcome.hits
        )
        rule_escalates[i] = _rule_escalates(outcome)
        if scores is not None:
            scored[i] = True
            arrays["toxic"][i] = min(1.0, max(0.0, 1.0 - scores.toxicity[0]))
            arrays["hate"][i] = scores.toxicity[2]
            arrays["spam"][i] = scores.intent[2]
            arrays["ad"][i] = scores.intent[3]
    lines = Lines(
        np.asarray(harmful, dtype=bool),
        rule_caught,
        rule_clearable,
        rule_escalates,
        scored=scored,
        lang=tuple(langs),
        **arrays,
    )
    return lines, decided


def _flags(lines: Lines, t: PolicyThresholds) -> tuple[Bools, Bools]:
    """(caught, flagged-blocked-or-escalated) per line under ``t``, as ``policy.decide`` has it."""
    clear_signal = np.maximum(lines.toxic, np.maximum(lines.spam, lines.ad))
    kept = lines.rule_clearable & (~lines.scored | (clear_signal >= t.model_clears_below))
    caught = (
        lines.rule_caught
        | kept
        | (lines.toxic >= t.flag_offensive)
        | (lines.hate >= t.flag_hate)
        | (lines.spam >= t.flag_spam)
        | (lines.ad >= t.flag_advertisement)
    )
    grey = (lines.toxic >= t.escalate_low) & (lines.toxic < t.escalate_high)
    return caught, caught | lines.rule_escalates | (lines.hate >= t.escalate_high) | grey


def _thresholds(
    base: PolicyThresholds, offensive: float, hate: float, spam: float, ad: float
) -> PolicyThresholds | None:
    if offensive >= base.escalate_high or hate > base.block_hate or spam > base.block_spam:
        return None
    return replace(
        base,
        flag_offensive=offensive,
        escalate_low=offensive,
        flag_hate=hate,
        flag_spam=spam,
        flag_advertisement=ad,
    )


def grade(lines: Lines, t: PolicyThresholds) -> Choice:
    caught, flagged = _flags(lines, t)
    harmful, everyday = lines.harmful, ~lines.harmful
    langs = np.asarray(lines.lang)
    by_lang = {
        lang: (
            _mean(caught[harmful & (langs == lang)]),
            _mean(flagged[everyday & (langs == lang)]),
        )
        for lang in sorted(set(lines.lang))
    }
    return Choice(
        t,
        _mean(caught[harmful]),
        _mean(flagged[everyday]),
        int(harmful.sum()),
        int(everyday.sum()),
        by_lang,
    )


def _mean(values: Bools) -> float:
    return round(float(values.mean()), 4) if len(values) else 0.0


def choose(lines: Lines, base: PolicyThresholds, max_everyday_fpr: float) -> Choice:
    """The most catching thresholds of the grid within the false-positive budget."""
    best: tuple[float, float, tuple[float, ...], Choice] | None = None
    for values in itertools.product(GRID, repeat=4):
        t = _thresholds(base, *values)
        if t is None:
            continue
        got = grade(lines, t)
        if got.everyday_fpr > max_everyday_fpr:
            continue
        key = (got.catch, -got.everyday_fpr, values, got)
        if best is None or key[:3] > best[:3]:
            best = key
    if best is None:
        raise ValueError(f"no thresholds keep everyday false positives under {max_everyday_fpr}")
    return best[3]


def _check_against_policy(
    lines: Lines,
    decided: list[tuple[RuleOutcome | None, ModelScores | None]],
    t: PolicyThresholds,
) -> None:
    caught, flagged = _flags(lines, t)
    for i, (outcome, scores) in enumerate(decided):
        if outcome is None:
            continue
        result = decide(outcome, scores, t, model_available=scores is not None)
        if is_caught(result) != caught[i] or is_false_positive(result) != flagged[i]:
            raise AssertionError(f"line {i}: the sweep and policy.decide disagree")


def _everyday_lines() -> list[tuple[str, str]]:
    """(text, language) of the held-out everyday chat, benign family and written everyday lines."""
    archives = fetch_all(ModelToolSettings().models.work_dir / "cache")
    chat = datasets.chat_lines(archives["chatterbot"])
    out = [(t, lang) for lang in ("en", "zh") for t in chat[lang] if datasets.held_out(SEED, t)]
    for name in ("hard_negatives", "counterfactuals"):
        out += [
            (line.text, line.lang)
            for line in template_lines(name, SEED)
            if datasets.held_out(SEED, line.text)
        ]
    out += [
        (line.text, line.lang)
        for line in written_lines()
        if line.label == "benign" and datasets.held_out(SEED, line.text)
    ]
    return out


def probe_rows(letters: str) -> list[tuple[str, str, bool]]:
    """(text, language, harmful) of the probes named by ``letters`` ("l,m,n"): read probes that
    may join the dev set for choosing thresholds. A probe that helps choose stops being a clean
    measure, so only probes already read (graded at the end of their session) belong here."""
    names = [f"probe_{letter.strip()}" for letter in letters.split(",") if letter.strip()]
    unknown = [name for name in names if name not in PROBES]
    if unknown:
        raise ValueError(f"{unknown} are not probes; they are {list(PROBES)}")
    return [(line.text, line.lang, line.harmful) for name in names for line in probe_lines(name)]


def _line(name: str, got: Choice) -> str:
    t = got.thresholds
    return (
        f"{name:9s} flag_offensive={t.flag_offensive:.2f} flag_hate={t.flag_hate:.2f} "
        f"flag_spam={t.flag_spam:.2f} flag_advertisement={t.flag_advertisement:.2f} "
        f"catch={got.catch:.4f} (n={got.harmful}) everyday_fpr={got.everyday_fpr:.4f} "
        f"(n={got.everyday}) "
        + " ".join(f"{lang}={c:.4f}/{f:.4f}" for lang, (c, f) in got.by_lang.items())
    )


def main(argv: Sequence[str] | None = None) -> int:
    from common.settings import project_root

    parser = argparse.ArgumentParser(prog="python -m modelbuild.thresholds", description=__doc__)
    parser.add_argument("--repository", type=Path, default=None)
    parser.add_argument(
        "--max-everyday-fpr",
        type=float,
        default=None,
        help="the false-positive budget on the everyday lines (default: what the policy's "
        "current defaults give, so the choice catches more without flagging more)",
    )
    parser.add_argument(
        "--with-probes",
        default="",
        metavar="LETTERS",
        help="also grade on these read probes' lines, harmful and everyday (for example "
        "l,m,n,o,p): more lines than the dev set alone, at the price of those probes' "
        "cleanliness; never name the newest, unread probe",
    )
    args = parser.parse_args(argv)
    dev = read_devset()
    everyday = _everyday_lines()
    rows = [
        *((e.text, e.lang, e.harmful) for e in dev),
        *((text, lang, False) for text, lang in everyday),
        *probe_rows(args.with_probes),
    ]
    texts = [text for text, _, _ in rows]
    langs = [lang for _, lang, _ in rows]
    harmful = [flag for _, _, flag in rows]
    scorer = served_scorer(args.repository or project_root() / "model_repository")
    lines, decided = sweep_lines(texts, harmful, langs, scorer)
    base = PolicyThresholds()
    current = grade(lines, base)
    budget = args.max_everyday_fpr if args.max_everyday_fpr is not None else current.everyday_fpr
    chosen = choose(lines, base, budget)
    _check_against_policy(lines, decided, chosen.thresholds)
    for field in ("flag_offensive", "flag_hate", "flag_spam", "flag_advertisement"):
        row = []
        for value in GRID:
            changes = {field: value} | (
                {"escalate_low": value} if field == "flag_offensive" else {}
            )
            try:
                got = grade(lines, replace(chosen.thresholds, **changes))
            except PolicyConfigError:
                continue
            row.append(f"{value:.2f}:{got.catch:.3f}/{got.everyday_fpr:.3f}")
        print(f"{field:19s} catch/everyday_fpr " + " ".join(row))
    print(_line("current", current))
    print(_line("chosen", chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
