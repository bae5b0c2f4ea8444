"""Grading the whole decision on the adversarial dev set: catch rates and false-positive rates.

A harmful line is *caught* when its decision is ``flag`` or ``block``; an escalation alone (an
``allow`` sent to human review) does not count, nor does a line the worker would dead-letter. A
benign line is a *false positive* when it is flagged, blocked or escalated (each costs a
reviewer's time or a user's message).

Per language: ``plain_catch`` (harmful lines as typed), ``disguised_catch`` (generated and
hand-made disguises) and ``benign_fpr`` (hard benign lines); then the same per transform, per
category and per benign topic. For disguised lines, ``if_plain_caught`` is the catch rate over
the generated disguises whose plain seed line is itself caught: what the disguise alone costs,
apart from what is missed even when typed plainly. Rates are rounded to 4 decimals; an empty
group rates 0.0 with ``n = 0``.

Given each decision's harm score (:func:`modelbuild.whole_decision.harm_score`), also what the
field reports (:func:`modelbuild.metrics.detection_metrics`), per language: precision, recall,
F1, false-positive rate and AUPRC of the whole decision over all its lines (harmful, plain and
disguised, against benign), and per category (the category's harmful lines against the benign
lines written to be mistaken for it, ``category`` of a benign line, or against every benign line
of the language where none has the category, as in a probe whose everyday lines have none).
``f1_<lang>`` of the first kind is in the headline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modelbuild.devset import DevExample
from modelbuild.metrics import detection_metrics
from pipelines.verdict import DecidedBy, Decision, PolicyResult

__all__ = ["HEADLINE_KEYS", "format_grading", "grade", "is_caught", "is_false_positive"]

HEADLINE_KEYS: tuple[str, ...] = (
    "disguised_catch_en",
    "disguised_catch_zh",
    "plain_catch_en",
    "plain_catch_zh",
    "benign_fpr_en",
    "benign_fpr_zh",
    "f1_en",
    "f1_zh",
)
_LANGS = ("en", "zh")


def is_caught(result: PolicyResult | None) -> bool:
    """Flagged or blocked (escalation alone is not a catch)."""
    return result is not None and result.decision in (Decision.FLAG, Decision.BLOCK)


def is_false_positive(result: PolicyResult | None) -> bool:
    """Flagged, blocked or escalated."""
    return result is not None and (result.decision is not Decision.ALLOW or result.escalate)


def _rate(hits: int, n: int) -> float:
    return round(hits / n, 4) if n else 0.0


def _group(
    pairs: Sequence[tuple[DevExample, PolicyResult | None]],
    *,
    benign: bool = False,
    plain_caught: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """``n`` and the rates that matter for these lines (all harmful, or all ``benign``)."""
    if any(e.harmful == benign for e, _ in pairs):
        raise ValueError("a group mixes harmful and benign lines")
    if benign:
        flagged = sum(is_false_positive(r) for _, r in pairs)
        return {"n": len(pairs), "fpr": _rate(flagged, len(pairs))}
    caught = sum(is_caught(r) for _, r in pairs)
    by_rules = sum(
        is_caught(r) and r is not None and r.decided_by is DecidedBy.RULES for _, r in pairs
    )
    escalated_only = sum(
        r is not None and r.decision is Decision.ALLOW and r.escalate for _, r in pairs
    )
    out: dict[str, Any] = {
        "n": len(pairs),
        "catch": _rate(caught, len(pairs)),
        "blocked_by_rules": _rate(by_rules, len(pairs)),
        "escalated_only": _rate(escalated_only, len(pairs)),
    }
    if plain_caught is not None:
        kept = [r for e, r in pairs if plain_caught.get(e.seed, False)]
        out["n_plain_caught"] = len(kept)
        out["if_plain_caught"] = _rate(sum(is_caught(r) for r in kept), len(kept))
    return out


def _metrics(
    pairs: Sequence[tuple[DevExample, PolicyResult | None]], scores: Sequence[float]
) -> dict[str, Any]:
    return detection_metrics(
        [e.harmful for e, _ in pairs], [is_caught(r) for _, r in pairs], list(scores)
    )


def _detection(
    pairs: Sequence[tuple[DevExample, PolicyResult | None]], scores: Sequence[float], lang: str
) -> dict[str, Any]:
    """``all`` and per-category detection metrics of one language."""
    mine = [i for i, (e, _) in enumerate(pairs) if e.lang == lang]
    out = {"all": _metrics([pairs[i] for i in mine], [scores[i] for i in mine])}
    benign = [i for i in mine if not pairs[i][0].harmful]
    for category in sorted({pairs[i][0].category for i in mine if pairs[i][0].harmful}):
        harmful = [i for i in mine if pairs[i][0].harmful and pairs[i][0].category == category]
        own = [i for i in benign if pairs[i][0].category == category]
        chosen = harmful + (own or benign)
        out[category] = _metrics([pairs[i] for i in chosen], [scores[i] for i in chosen])
    return out


def grade(
    examples: Sequence[DevExample],
    results: Sequence[PolicyResult | None],
    scores: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Every figure of the dev-set grading, JSON-ready; ``headline`` holds ``HEADLINE_KEYS``.
    Without ``scores`` (one harm score per line) the AUPRCs are computed from the decisions
    alone (caught 1, else 0)."""
    if len(examples) != len(results):
        raise ValueError(f"{len(examples)} lines but {len(results)} decisions")
    if scores is None:
        scores = [1.0 if is_caught(r) else 0.0 for r in results]
    if len(scores) != len(results):
        raise ValueError(f"{len(results)} decisions but {len(scores)} scores")
    pairs = list(zip(examples, results, strict=True))
    report: dict[str, Any] = {"lines": len(pairs), "by_lang": {}, "by_transform": {}}
    report["by_category"] = {}
    report["benign_by_topic"] = {}
    for lang in _LANGS:
        mine = [p for p in pairs if p[0].lang == lang]
        forms = {f: [p for p in mine if p[0].form == f] for f in ("plain", "disguised")}
        benign = [p for p in mine if not p[0].harmful]
        caught = {e.text: is_caught(r) for e, r in forms["plain"]}
        report["by_lang"][lang] = {
            "plain": _group(forms["plain"]),
            "disguised": _group(forms["disguised"], plain_caught=caught),
            "benign": _group(benign, benign=True),
        }
        transforms = sorted({e.transform for e, _ in forms["disguised"]})
        report["by_transform"][lang] = {
            t: _group([p for p in forms["disguised"] if p[0].transform == t], plain_caught=caught)
            for t in transforms
        }
        categories = sorted({e.category for e, _ in mine})
        report["by_category"][lang] = {
            c: {
                "plain": _group([p for p in forms["plain"] if p[0].category == c]),
                "disguised": _group(
                    [p for p in forms["disguised"] if p[0].category == c], plain_caught=caught
                ),
                "benign": _group([p for p in benign if p[0].category == c], benign=True),
            }
            for c in categories
        }
        topics = sorted({e.topic for e, _ in benign})
        report["benign_by_topic"][lang] = {
            t: _group([p for p in benign if p[0].topic == t], benign=True) for t in topics
        }
    report["headline"] = {
        f"{metric}_{lang}": report["by_lang"][lang][form][field]
        for metric, form, field in (
            ("disguised_catch", "disguised", "catch"),
            ("plain_catch", "plain", "catch"),
            ("benign_fpr", "benign", "fpr"),
        )
        for lang in _LANGS
    }
    report["detection"] = {lang: _detection(pairs, scores, lang) for lang in _LANGS}
    for lang in _LANGS:
        report["headline"][f"f1_{lang}"] = report["detection"][lang]["all"]["f1"]
    report["headline"] = {k: report["headline"][k] for k in HEADLINE_KEYS}
    report["decisions"] = [
        {
            "text": e.text,
            "lang": e.lang,
            "form": e.form,
            "category": e.category,
            "transform": e.transform,
            "decision": r.decision.value if r is not None else "dead_letter",
            "escalate": bool(r is not None and r.escalate),
            "decided_by": r.decided_by.value if r is not None else None,
            "reasons": list(r.reasons) if r is not None else [],
        }
        for e, r in pairs
    ]
    return report


def _line(label: str, group: dict[str, Any]) -> str:
    if "fpr" in group:
        return f"{label} n={group['n']:4d} fpr={group['fpr']:.4f}"
    line = (
        f"{label} n={group['n']:4d} catch={group['catch']:.4f} "
        f"rule_blocked={group['blocked_by_rules']:.4f} escalated_only={group['escalated_only']:.4f}"
    )
    if group.get("n_plain_caught"):
        line += f" if_plain_caught={group['if_plain_caught']:.4f} (n={group['n_plain_caught']})"
    return line


def _detection_line(label: str, m: dict[str, Any]) -> str:
    def f(key: str) -> str:
        return f"{m[key]:.4f}" if m[key] is not None else "-"

    return (
        f"{label} harmful={m['n_harmful']:4d} benign={m['n_benign']:4d} "
        f"precision={f('precision')} recall={f('recall')} f1={m['f1']:.4f} "
        f"fpr={f('fpr')} auprc={f('auprc')}"
    )


def format_grading(report: dict[str, Any]) -> list[str]:
    """The printed lines of the grading (per language, transform, category and benign topic,
    then the detection metrics), weakest transform first within a language."""
    lines: list[str] = []
    for lang in _LANGS:
        for form, group in report["by_lang"][lang].items():
            lines.append(_line(f"devset    {lang} {form:27s}", group))
        by_transform = report["by_transform"][lang]
        for name in sorted(by_transform, key=lambda t: (by_transform[t]["catch"], t)):
            lines.append(_line(f"devset    {lang} transform {name:17s}", by_transform[name]))
        for category, groups in report["by_category"][lang].items():
            for form, group in groups.items():
                if group["n"]:
                    lines.append(_line(f"devset    {lang} {category:10s} {form:16s}", group))
        for topic, group in report["benign_by_topic"][lang].items():
            lines.append(_line(f"devset    {lang} benign {topic:20s}", group))
    for lang in _LANGS:
        for category, m in report.get("detection", {}).get(lang, {}).items():
            lines.append(_detection_line(f"devset    {lang} detection {category:10s}", m))
    return lines
