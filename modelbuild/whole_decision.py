"""The worker's whole decision for a list of texts, computed in process for evaluation.

Each text takes the worker's own path (``worker/app.py`` ``_decode`` and ``_route``,
``engine/processing.py`` ``_verdict``), through the same ``pipelines`` functions:

1. a Kafka record value with the text is decoded by ``pipelines.decode.decode_message`` (a text
   the worker would dead-letter gets no decision, ``None``);
2. the canonical text (``pipelines.canonical.canonicalize``), computed once per message and
   given to ``RuleEngine.evaluate`` with the default rule set;
3. a rule block (``RuleOutcome.is_decisive``) is decided without the model, as the worker's
   decided batches are (``decide(outcome, None, thresholds, model_available=False)``);
4. every other message's canonical text (``CanonicalText.text``: what the worker sends to the
   model, and what the heads are trained on, see :mod:`modelbuild.canonical_inputs`) is scored
   by the served ``moderation`` model's own code
   (``modelbuild/serving/pipeline_model.py``, run in process on the files its ``config.pbtxt``
   names, as ``bench/models.py`` does) and decided by ``decide(outcome, scores, thresholds)``.

Each decision also gets a harm score (:func:`harm_score`) that ranks messages the way the
decision thresholds them, for the area under the precision-recall curve.

What the worker adds and this leaves out: the sender-strike enrichment of the message metadata
(every line here is from a fresh sender with no strikes) and Triton's transport.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from pipelines.canonical import CanonicalText, canonicalize
from pipelines.decode import DecodeError, decode_message
from pipelines.messages import ChatMessage
from pipelines.policy import PolicyThresholds, decide, model_flag_pairs, standing_flags
from pipelines.rule_hits import RuleOutcome
from pipelines.rules import RuleEngine, default_ruleset
from pipelines.scores import HARMS_OUTPUT, MODEL_OUTPUTS, ModelScores
from pipelines.verdict import PolicyResult

__all__ = [
    "FLAG_SCORE",
    "MAX_RECORD_BYTES",
    "RULE_SCORE",
    "Decided",
    "Scorer",
    "decide_and_score",
    "decide_texts",
    "harm_score",
    "outcomes_and_scores",
    "served_config",
    "served_scorer",
]

Scorer = Callable[[Sequence[str]], list[ModelScores]]
"""Model scores for a batch of texts, one per text, in order."""

RULE_SCORE = 1.0
"""The :func:`harm_score` of a message a flag or block rule hit (above every model score)."""
FLAG_SCORE = 0.5
"""The :func:`harm_score` from which the model flags a message."""
MAX_RECORD_BYTES = 1_048_576
"""The worker's default ``kafka.max_message_bytes``."""
_SENT_AT = datetime(2026, 1, 1, tzinfo=UTC)
_BATCH = 64
_PARAMETER = re.compile(r'key: "(\w+)" value: \{ string_value: "([^"]*)" \}')
_OUTPUT = re.compile(r'\{ name: "([A-Z]+)" data_type: TYPE_FP32 dims: \[ (\d+) \]')


@dataclass(frozen=True, slots=True)
class Decided:
    """One text's decision (``None``: the worker would dead-letter it) and its harm score."""

    result: PolicyResult | None
    score: float


def _record(index: int, text: str) -> bytes:
    """The Kafka record value a platform would publish for ``text``."""
    document = {
        "message_id": f"devset-{index}",
        "group_id": "devset",
        "sender_id": f"devset-sender-{index}",
        "text": text,
        "sent_at": _SENT_AT.isoformat(),
    }
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def _message(index: int, text: str) -> ChatMessage | None:
    try:
        return decode_message(_record(index, text), max_bytes=MAX_RECORD_BYTES)
    except DecodeError:
        return None


def decide_texts(
    texts: Sequence[str],
    scorer: Scorer,
    *,
    engine: RuleEngine | None = None,
    thresholds: PolicyThresholds | None = None,
) -> list[PolicyResult | None]:
    """The worker's decision for each text (``None`` for a text it would dead-letter); only the
    canonical texts of the messages no rule blocks are sent to ``scorer``, in batches."""
    return [d.result for d in decide_and_score(texts, scorer, engine=engine, thresholds=thresholds)]


def decide_and_score(
    texts: Sequence[str],
    scorer: Scorer,
    *,
    engine: RuleEngine | None = None,
    thresholds: PolicyThresholds | None = None,
) -> list[Decided]:
    """:func:`decide_texts` with each decision's :func:`harm_score`."""
    thresholds = thresholds if thresholds is not None else PolicyThresholds()
    out: list[Decided] = []
    for outcome, row in outcomes_and_scores(texts, scorer, engine=engine):
        if outcome is None:
            out.append(Decided(None, 0.0))
        elif row is not None:
            out.append(
                Decided(decide(outcome, row, thresholds), harm_score(outcome, row, thresholds))
            )
        else:
            result = decide(outcome, None, thresholds, model_available=False)
            out.append(Decided(result, harm_score(outcome, None, thresholds)))
    return out


def outcomes_and_scores(
    texts: Sequence[str], scorer: Scorer, *, engine: RuleEngine | None = None
) -> list[tuple[RuleOutcome | None, ModelScores | None]]:
    """What the policy decides each text from: its rule outcome (``None`` for a text the worker
    would dead-letter) and its model scores (``None`` when a rule blocks it: the worker sends
    only the canonical texts of the other messages to the model)."""
    engine = engine if engine is not None else RuleEngine(default_ruleset())
    messages = [_message(i, t) for i, t in enumerate(texts)]
    canonical: list[CanonicalText | None] = [
        canonicalize(m.text) if m is not None else None for m in messages
    ]
    outcomes = [
        engine.evaluate(m, c) if m is not None else None
        for m, c in zip(messages, canonical, strict=True)
    ]
    to_score = [i for i, o in enumerate(outcomes) if o is not None and not o.is_decisive]
    scores: dict[int, ModelScores] = {}
    for start in range(0, len(to_score), _BATCH):
        chunk = to_score[start : start + _BATCH]
        rows = scorer([_text(canonical[i]) for i in chunk])
        if len(rows) != len(chunk):
            raise ValueError(f"scorer returned {len(rows)} rows for {len(chunk)} texts")
        scores.update(zip(chunk, rows, strict=True))
    return [(outcome, scores.get(i)) for i, outcome in enumerate(outcomes)]


def harm_score(
    outcome: RuleOutcome, scores: ModelScores | None, thresholds: PolicyThresholds
) -> float:
    """How harmful the whole decision finds a message, in [0, 1], for ranking (AUPRC): 1.0 when a
    flag or block rule hit it; else ``r / (1 + r)`` where ``r`` is its largest model probability
    over that probability's flag threshold (``policy.model_flag_pairs``: ``1 - P(none)`` over
    ``flag_offensive``, ``P(hate)`` over ``flag_hate``, ``P(spam)`` and ``P(advertisement)`` over
    theirs, and each harm over its ``flag_<harm>`` when the model has them). The model flags or
    blocks a message exactly when its score is at least 0.5. A flag the model clears
    (``policy.standing_flags``) does not count as a rule hit."""
    if outcome.is_decisive or standing_flags(outcome.hits, scores, thresholds):
        return RULE_SCORE
    if scores is None:
        return 0.0
    pairs = model_flag_pairs(scores, thresholds)
    if any(threshold == 0.0 for _, threshold in pairs):
        return RULE_SCORE
    ratio = max(value / threshold for value, threshold in pairs)
    return ratio / (1.0 + ratio)


def _text(canonical: CanonicalText | None) -> str:
    if canonical is None:  # only decoded messages are scored
        raise ValueError("a message that was not decoded has no canonical text")
    return canonical.text


def served_config(repository: Path, model: str = "moderation") -> dict[str, str]:
    """The ``initialize`` arguments Triton gives ``model``: its ``config.pbtxt`` outputs and
    string parameters as JSON, and its folder."""
    text = (repository / model / "config.pbtxt").read_text(encoding="utf-8")
    config = {
        "output": [{"name": n, "dims": [int(d)]} for n, d in _OUTPUT.findall(text)],
        "parameters": {k: {"string_value": v} for k, v in _PARAMETER.findall(text)},
    }
    return {"model_config": json.dumps(config), "model_repository": str(repository / model)}


def served_scorer(
    repository: Path, model: str = "moderation", threads: int = 2, *, cpu_encoder: bool = False
) -> Scorer:
    """The served model's code (tokenizer, encoder, heads) in process, as a :data:`Scorer`, with
    a fixed encoder: float32 (the reference every CPU encoder is held to), or with
    ``cpu_encoder`` the config's ``cpu_encoder_file`` whatever its load-time check finds (so an
    evaluation does not depend on which encoder a machine would pick)."""
    from modelbuild.serving.pipeline_model import CPU, TritonPythonModel

    served = TritonPythonModel()
    args = served_config(repository, model)
    config = json.loads(args["model_config"])
    params = config["parameters"]
    params["intra_op_threads"] = {"string_value": str(threads)}
    if cpu_encoder:
        params["cpu_encoder_max_deviation"] = {"string_value": "1"}
        params["cpu_encoder_min_speedup"] = {"string_value": "0"}
    else:
        params.pop("cpu_encoder_file", None)
    served.initialize({**args, "model_config": json.dumps(config)})
    if cpu_encoder and served.choice.encoder != CPU:
        raise FileNotFoundError(f"{model}: no CPU encoder to score with ({served.choice.reason})")

    def score(texts: Sequence[str]) -> list[ModelScores]:
        out = served.scores(list(texts))
        names = [*MODEL_OUTPUTS, *([HARMS_OUTPUT] if HARMS_OUTPUT in out else [])]
        rows = {name: np.asarray(out[name], dtype=np.float64).tolist() for name in names}
        harms = rows.get(HARMS_OUTPUT, [None] * len(texts))
        return [
            ModelScores(tuple(s), tuple(i), tuple(t), tuple(h) if h is not None else None)
            for s, i, t, h in zip(
                rows["SENTIMENT"], rows["INTENT"], rows["TOXICITY"], harms, strict=True
            )
        ]

    return score
