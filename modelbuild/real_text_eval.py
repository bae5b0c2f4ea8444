"""The whole decision graded on real human text that no model here was trained on.

Three measures, each for every served moderation model side by side:

- **everyday flag and block rates**: the worker's whole decision (rules, model, policy at the
  default thresholds) on the held-out conversations of :mod:`modelbuild.real_text`: real Chinese
  customer-service dialogue lines, real English text messages that are not spam, and English
  film dialogue (held-out scenes). Nobody labelled these lines in advance; a person read every
  line the served model flags there (:mod:`modelbuild.flag_audit`), so each set also reports its
  false flag rate: flags on lines not read as harmful (a flag nobody read counts as false).
- **the insult label** of the human-labelled comments of ``train.csv``: the area under the ROC
  and precision-recall curves of the whole decision's harm score, the share of insults the
  decision flags or blocks (catch) and the share of other comments it flags. A model whose
  insult output was fitted on these comments (the fine-tuned ``moderation``) is graded on its
  out-of-fold probabilities: each comment scored by the insult output fitted without its fold
  (:mod:`modelbuild.train`), everything else as served.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from modelbuild.canonical_inputs import canonical_text
from modelbuild.flag_audit import FlagAudit, load_audit
from modelbuild.real_text import LabelledLine, RealText
from modelbuild.whole_decision import Scorer, decide_and_score
from pipelines.scores import HARM_LABELS, ModelScores
from pipelines.verdict import Decision

__all__ = [
    "everyday_rates",
    "grade_real_text",
    "insult_figures",
    "with_insult",
]

_INSULT = HARM_LABELS.index("insult")


def everyday_rates(
    texts: Sequence[str], scorer: Scorer, audit: FlagAudit | None = None
) -> dict[str, Any]:
    """Flag, block and escalation rates of the whole decision on everyday lines, and the
    categories and reasons of the flags (counts; never the text); with ``audit``, its figures
    for these flags too."""
    decided = [d.result for d in decide_and_score(texts, scorer)]
    kept = [r for r in decided if r is not None]
    kept_texts = [t for t, r in zip(texts, decided, strict=True) if r is not None]
    n = len(kept)
    flagged = [r for r in kept if r.decision != Decision.ALLOW]
    blocked = [r for r in kept if r.decision == Decision.BLOCK]
    escalated = [r for r in kept if r.escalate]
    reasons = Counter(reason.split("=")[0] for r in flagged for reason in r.reasons)
    audited: dict[str, Any] = {}
    if audit is not None:
        audited = audit.figures(
            kept_texts,
            [r.decision != Decision.ALLOW for r in kept],
            [r.decision == Decision.BLOCK for r in kept],
        )
    return {
        "lines": n,
        "flag_rate": round(len(flagged) / n, 4) if n else 0.0,
        "block_rate": round(len(blocked) / n, 4) if n else 0.0,
        "escalate_rate": round(len(escalated) / n, 4) if n else 0.0,
        "flag_categories": dict(Counter(str(r.category) for r in flagged).most_common()),
        "flag_reasons": dict(reasons.most_common(12)),
        **audited,
    }


def with_insult(scorer: Scorer, insult: Mapping[str, float]) -> Scorer:
    """``scorer`` with the insult probability of the canonical texts in ``insult`` replaced
    (the out-of-fold scores of a model whose insult output saw the comments)."""

    def score(texts: Sequence[str]) -> list[ModelScores]:
        rows = scorer(texts)
        out = []
        for text, row in zip(texts, rows, strict=True):
            if row.harms is not None and text in insult:
                harms = list(row.harms)
                harms[_INSULT] = insult[text]
                row = dataclasses.replace(row, harms=tuple(harms))
            out.append(row)
        return out

    return score


def insult_figures(comments: Sequence[LabelledLine], scorer: Scorer) -> dict[str, Any]:
    """The whole decision on the human-labelled comments: AUC and AUPRC of its harm score,
    catch of insults and flag rate of the other comments."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    decided = decide_and_score([c.text for c in comments], scorer)
    labels = np.array([c.label for c in comments])
    scores = np.array([d.score for d in decided])
    flagged = np.array(
        [d.result is not None and d.result.decision != Decision.ALLOW for d in decided]
    )
    return {
        "comments": len(comments),
        "insults": int(labels.sum()),
        "auc": round(float(roc_auc_score(labels, scores)), 4),
        "auprc": round(float(average_precision_score(labels, scores)), 4),
        "catch": round(float(flagged[labels == 1].mean()), 4),
        "flag_rate_other": round(float(flagged[labels == 0].mean()), 4),
    }


def grade_real_text(
    real: RealText,
    scorers: Mapping[str, Scorer],
    out_of_fold: Mapping[str, Callable[[], Mapping[str, float]]],
) -> dict[str, Any]:
    """Every measure above for every model in ``scorers``; ``out_of_fold[model]`` gives the
    out-of-fold insult probabilities (by canonical text) for a model that fitted on the
    comments."""
    from sklearn.metrics import roc_auc_score

    labels = [c.label for c in real.insults]
    keys = [canonical_text(c.text) for c in real.insults]
    audits = load_audit()
    report: dict[str, Any] = {}
    for model, scorer in scorers.items():
        insult_scorer = scorer
        figures: dict[str, Any] = {}
        if model in out_of_fold:
            held = out_of_fold[model]()
            insult_scorer = with_insult(scorer, held)
            model_auc = roc_auc_score(labels, [held[k] for k in keys])
            figures["model_cv_auc"] = round(float(model_auc), 4)
        else:
            rows = scorer(keys)
            model_auc = roc_auc_score(labels, [1.0 - r.toxicity[0] for r in rows])
            figures["model_auc"] = round(float(model_auc), 4)
        report[model] = {
            "everyday_en": everyday_rates(real.en_held_out, scorer, audits["everyday_en"]),
            "everyday_en_film": everyday_rates(
                real.movie_held_out, scorer, audits["everyday_en_film"]
            ),
            "everyday_zh": everyday_rates(real.zh_held_out, scorer, audits["everyday_zh"]),
            "insults": {**insult_figures(real.insults, insult_scorer), **figures},
        }
    return report
