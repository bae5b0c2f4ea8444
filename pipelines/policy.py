"""The verdict policy: rule hits plus model scores become allow / flag / block, and escalation.

``decide`` is pure. Its rules, in order:

1. **Decisive rules.** When a ``block`` rule matched (``RuleOutcome.is_decisive``) the decision
   is BLOCK, ``decided_by = rules``, whatever the scores. It escalates when any hit is
   ``critical`` or asks to ``escalate``.
2. **No model.** When ``scores`` is ``None`` or ``model_available`` is false the decision is
   from rules alone and ``decided_by = pending_model`` (the message is re-scored later): FLAG when
   a ``flag`` rule matched, else ALLOW; escalate when a hit asks to escalate or is critical.
3. **Model.** Otherwise, with ``hate = P(toxicity=hate)``, ``toxic = 1 - P(none)``
   (the probability of being at least offensive, so a shift from offensive to hate never
   lowers the decision), ``spam = P(intent=spam)``, ``ad = P(intent=advertisement)``:

   - BLOCK when ``hate >= block_hate`` (hate), ``toxic >= block_offensive`` (offensive) or
     ``spam >= block_spam`` (spam);
   - FLAG when ``hate >= flag_hate``, ``toxic >= flag_offensive``, ``spam >= flag_spam``,
     ``ad >= flag_advertisement``, or a ``flag`` rule matched that the model does not clear;
   - the model **clears** the flag of a rule marked ``yields_to_model`` (word-list rules whose
     words have ordinary senses: "wanker of a pigeon stole my chip", "特么的, 手机摔碎屏了") when
     ``toxic``, ``spam`` and ``ad`` are all below ``model_clears_below``: the hit stays in the
     reasons, followed by ``cleared_by_model:<rule id>``;
   - otherwise ALLOW. ``escalate`` rule hits escalate but do not raise the decision by
     themselves (a human decides).

   It escalates in the grey zone ``escalate_low <= toxic < escalate_high``, for severe hate
   (``hate >= escalate_high``) and for ``escalate`` or ``critical`` rule hits.

4. **Harms.** When the model has the ``HARMS`` output (``ModelScores.harms``; ``None`` for older
   models, which are decided exactly as above), each harm is compared with its own threshold:

   - ``insult``: FLAG at ``flag_insult``, BLOCK at ``block_insult``, category ``offensive``;
   - ``threat``: FLAG at ``flag_threat``, category ``threat`` (severe), never a model block;
   - ``self_harm``: FLAG at ``flag_self_harm``, category ``self_harm`` (severe), never blocked;
   - ``self_harm_incitement``: FLAG at ``flag_self_harm_incitement``, category
     ``self_harm_incitement`` (severe), never a model block;
   - ``sexual_solicitation``: FLAG at ``flag_sexual_solicitation``, category ``sexual``.

   An insult at a participant is what the ``offensive`` rules catch by word (the
   ``en.harassment.demeaning`` patterns among them), and adult solicitation is the rules'
   non-severe ``sexual``. A severe harm at or above its threshold flags and escalates like a
   severe rule hit (the priority floor, the urgent category; see below), and a ``self_harm``
   one caps a model-driven BLOCK at FLAG; the model alone never blocks a threat or self-harm.
   The reason names the harm: ``harms.threat=0.734>=0.5``. The grey zone reads the larger of
   ``toxic`` and ``P(insult)`` (``grey_zone:harms.insult=0.700`` when the insult is larger);
   the model clears a ``yields_to_model`` flag only when every harm is below
   ``model_clears_below`` too; the confidence below counts the harms.

**Off.** A flag or block threshold of 1.0 (``OFF_THRESHOLD``, a tenant's ``off`` level,
``pipelines.policy_levels``) never fires, whatever the probability; with ``flag_hate`` at 1.0
severe hate does not escalate, with ``flag_offensive`` (``flag_insult``) at 1.0 the grey zone
does not read ``toxic`` (``P(insult)``). Rule hits are not affected.

``category`` is the category of the strongest signal at the final decision level (model hate
before offensive before spam and advertisement, harms by their weights below, rule hits by
severity); for an escalated ALLOW it is what escalated it; for a plain ALLOW it is ``None``.

``priority = 0.6 * severity + 0.4 * confidence``, clamped to [0, 1], where ``severity`` is the
largest weight among the signals that drove the decision or escalation (rule hits:
low 0.25, medium 0.5, high 0.75, critical 1.0; model: hate 0.75, offensive 0.5, spam and
advertisement 0.25, and 1.0 for severe hate) and ``confidence`` is 1.0 for a decisive rule
block, 0.5 without a model, and otherwise the largest of ``toxic``, ``spam``, ``ad`` and the
harms. Model harms weigh 0.5 (insult), 0.75 (sexual solicitation, as a ``high`` rule hit) and,
for the severe ones, their floor below (threat 0.85, self_harm 1.0, incitement 0.8).

**Severe harm** (``pipelines.severe_harm``), in every branch above; a model harm at or above its
flag threshold counts as a hit of its category here:

- a rule hit in a severe category (threat, self_harm, self_harm_incitement,
  sexual_exploitation, sexual_exploitation_minors) escalates whatever its action;
- the priority is at least the category's floor (1.0 for self_harm and
  sexual_exploitation_minors, 0.85 for threat and sexual_exploitation, 0.8 for incitement);
- when a self_harm or sexual_exploitation_minors hit is present, ``category`` is that category
  (self_harm first), so the review item is filed where the queue puts it first;
- a self_harm hit turns a model-driven BLOCK into FLAG (reason ``never_block:self_harm``): the
  writer may be in crisis and a person decides. A block rule of another category still blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from pipelines.errors import PipelineError
from pipelines.rule_hits import RuleAction, RuleHit, RuleOutcome, Severity
from pipelines.scores import HARM_LABELS, ModelScores
from pipelines.severe_harm import (
    REVIEW_PRIORITY_FLOOR,
    SELF_HARM,
    SELF_HARM_INCITEMENT,
    THREAT,
    SevereTable,
)
from pipelines.verdict import DecidedBy, Decision, PolicyResult

__all__ = [
    "HARM_CATEGORIES",
    "OFF_THRESHOLD",
    "PolicyConfigError",
    "PolicyThresholds",
    "decide",
    "model_flag_pairs",
    "standing_flags",
]

_LEVEL = {Decision.ALLOW: 0, Decision.FLAG: 1, Decision.BLOCK: 2}
_SEVERITY_WEIGHT = {
    Severity.LOW: 0.25,
    Severity.MEDIUM: 0.5,
    Severity.HIGH: 0.75,
    Severity.CRITICAL: 1.0,
}
_HATE_WEIGHT = 0.75
_SEVERE_HATE_WEIGHT = 1.0
_OFFENSIVE_WEIGHT = 0.5
_SPAM_WEIGHT = 0.25
_SEVERITY_SHARE = 0.6
_CONFIDENCE_SHARE = 0.4
_NO_MODEL_CONFIDENCE = 0.5
_RULE_CONFIDENCE = 1.0
_SEXUAL_WEIGHT = _SEVERITY_WEIGHT[Severity.HIGH]

HARM_CATEGORIES: dict[str, str] = {
    "insult": "offensive",
    "threat": THREAT,
    "self_harm": SELF_HARM,
    "self_harm_incitement": SELF_HARM_INCITEMENT,
    "sexual_solicitation": "sexual",
}
"""The category a model harm flags under, per ``HARM_LABELS`` entry."""
_HARM_WEIGHT: dict[str, float] = {
    "insult": _OFFENSIVE_WEIGHT,
    "threat": REVIEW_PRIORITY_FLOOR[THREAT],
    "self_harm": REVIEW_PRIORITY_FLOOR[SELF_HARM],
    "self_harm_incitement": REVIEW_PRIORITY_FLOOR[SELF_HARM_INCITEMENT],
    "sexual_solicitation": _SEXUAL_WEIGHT,
}


OFF_THRESHOLD = 1.0
"""A flag or block threshold at 1.0 never fires: the model does not flag, block or escalate the
category (a tenant's ``off`` level, ``pipelines.policy_levels``)."""


class PolicyConfigError(PipelineError):
    """Thresholds that cannot work together (out of [0, 1], or a flag above its block)."""


@dataclass(frozen=True, slots=True)
class PolicyThresholds:
    """Thresholds on model probabilities. The worker's settings hold one as ``policy``
    (``MODSTREAM_POLICY__FLAG_HATE=0.7`` ...), and a policy file may set any of them; a grey-zone
    harmful probability in ``[escalate_low, escalate_high)`` escalates (``escalate_low``
    defaults to ``flag_offensive``: what the model flags but does not block goes to a person,
    and nothing the model allows does).

    The served model's heads are calibrated (temperature scaling on held-out examples, see
    ``model_repository/moderation/MODEL_CARD.md``), so one number means the same in every
    category: every non-severe flag threshold is 0.65 (offensive, hate, spam, advertisement,
    insult, sexual solicitation), and the severe harms (threat, self-harm, incitement) flag and
    escalate from 0.5, since a person should see them sooner. Blocks need near-certainty:
    offensive 0.95, insult and spam 0.97, hate 0.85 (hate at or above ``escalate_high`` is
    also escalated as severe). Measured with ``modstream models eval`` and ``python -m
    modelbuild.probe_set`` against the thresholds the previous, uncalibrated heads used (hate,
    spam and advertisement 0.40, the harms 0.5): real everyday English text messages flagged
    2.9 % instead of 4.2 %, Chinese customer-service lines 0.4 % instead of 0.5 %, the dev set's
    hard benign lines 1.4 % / 8.1 % instead of 4.1 % / 12.2 % (en / zh), for 3 and 1 points of
    plain harmful catch on the written probe X (0.90 / 0.89)."""

    block_hate: float = 0.85
    block_offensive: float = 0.95
    flag_offensive: float = 0.65
    flag_hate: float = 0.65
    block_spam: float = 0.97
    flag_spam: float = 0.65
    flag_advertisement: float = 0.65
    escalate_low: float = 0.65
    escalate_high: float = 0.85
    model_clears_below: float = 0.01
    """The flag of a ``yields_to_model`` rule is dropped when the model's offensive-or-hate, spam
    and advertisement probabilities are all below this (0 turns clearing off). At 0.01, over the
    dev set and probes L-W (``python -m modelbuild.thresholds`` checks the policy against its
    sweep), the word lists that yield (both profanity lists and the Chinese insult list) had their
    flags cleared on six everyday lines (ordinary senses, swearing at nobody, a word discussed)
    and on no harmful line; at 0.02 a harmful line ("草泥马的中单, 又送") was cleared too."""
    flag_insult: float = 0.65
    """The harm thresholds below apply only to a model with the ``HARMS`` output (independent
    calibrated probabilities, so one number means the same in every category). An insult at
    a participant flags (category ``offensive``) at ``flag_insult`` and blocks at
    ``block_insult``."""
    block_insult: float = 0.97
    flag_threat: float = 0.5
    """A threat of violence flags and escalates (category ``threat``); the model never blocks it."""
    flag_self_harm: float = 0.5
    """The writer's own intent to hurt themselves flags and escalates (``self_harm``); never
    blocked, and it caps a model-driven block at flag."""
    flag_self_harm_incitement: float = 0.5
    """Telling someone to hurt themselves flags and escalates (``self_harm_incitement``)."""
    flag_sexual_solicitation: float = 0.65
    """Sexual solicitation flags (category ``sexual``)."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not 0.0 <= value <= 1.0
            ):
                raise PolicyConfigError(f"{item.name} must be a number in [0, 1]")
        if not self.escalate_low < self.escalate_high:
            raise PolicyConfigError("escalate_low must be below escalate_high")
        for flag, block in (
            ("flag_hate", "block_hate"),
            ("flag_offensive", "block_offensive"),
            ("flag_spam", "block_spam"),
            ("flag_insult", "block_insult"),
        ):
            if getattr(self, flag) > getattr(self, block):
                raise PolicyConfigError(f"{flag} must not exceed {block}")


@dataclass(frozen=True, slots=True)
class _Signal:
    level: Decision
    category: str
    weight: float
    reason: str


def decide(
    outcome: RuleOutcome,
    scores: ModelScores | None,
    thresholds: PolicyThresholds,
    *,
    model_available: bool = True,
) -> PolicyResult:
    """The decision for one message; see the module docstring for the exact rules."""
    hits = _by_severity(outcome.hits)
    rule_reasons = tuple(f"rule:{hit.rule_id}" for hit in hits)
    severe = outcome.severe
    rule_escalations = [hit for hit in hits if _escalates(hit, severe)]
    categories = {hit.category for hit in hits}
    if outcome.is_decisive:
        result = _decisive(hits, rule_reasons, bool(rule_escalations))
    elif scores is None or not model_available:
        result = _rules_only(hits, rule_reasons, rule_escalations)
    else:
        harms = _harm_signals(scores, thresholds)
        result = _with_model(
            hits, rule_reasons, rule_escalations, scores, harms, thresholds, severe
        )
        categories |= {signal.category for signal in harms}
    return _severe_review(result, categories, severe)


def _by_severity(hits: tuple[RuleHit, ...]) -> tuple[RuleHit, ...]:
    # Stable: keeps the engine's order among equal severities.
    return tuple(sorted(hits, key=lambda hit: -hit.severity))


def _escalates(hit: RuleHit, severe: SevereTable) -> bool:
    return (
        hit.action is RuleAction.ESCALATE
        or hit.severity is Severity.CRITICAL
        or severe.is_severe(hit.category)
    )


def _severe_review(result: PolicyResult, categories: set[str], severe: SevereTable) -> PolicyResult:
    """The priority floor and the urgent category of severe-harm hits and model harms
    (module docstring), by the outcome's table of severe categories."""
    floor = max((severe.floor(category) for category in categories), default=0.0)
    urgent = next((c for c in severe.names if c in severe.urgent & categories), None)
    if floor <= result.priority and urgent in (None, result.category):
        return result
    return replace(
        result,
        priority=max(result.priority, floor),
        category=urgent if urgent is not None else result.category,
    )


def _priority(severity: float, confidence: float) -> float:
    value = _SEVERITY_SHARE * severity + _CONFIDENCE_SHARE * confidence
    return min(1.0, max(0.0, round(value, 6)))


def _decisive(hits: tuple[RuleHit, ...], reasons: tuple[str, ...], escalate: bool) -> PolicyResult:
    driver = next(hit for hit in hits if hit.action is RuleAction.BLOCK)
    return PolicyResult(
        decision=Decision.BLOCK,
        decided_by=DecidedBy.RULES,
        escalate=escalate,
        category=driver.category,
        priority=_priority(_SEVERITY_WEIGHT[hits[0].severity], _RULE_CONFIDENCE),
        reasons=reasons,
    )


def _rules_only(
    hits: tuple[RuleHit, ...], reasons: tuple[str, ...], escalations: list[RuleHit]
) -> PolicyResult:
    flags = [hit for hit in hits if hit.action is RuleAction.FLAG]
    decision = Decision.FLAG if flags else Decision.ALLOW
    drivers = flags + escalations
    category = _by_severity(tuple(drivers))[0].category if drivers else None
    severity = max((_SEVERITY_WEIGHT[hit.severity] for hit in drivers), default=0.0)
    return PolicyResult(
        decision=decision,
        decided_by=DecidedBy.PENDING_MODEL,
        escalate=bool(escalations),
        category=category,
        priority=_priority(severity, _NO_MODEL_CONFIDENCE),
        reasons=(*reasons, "model:pending"),
    )


def _with_model(
    hits: tuple[RuleHit, ...],
    rule_reasons: tuple[str, ...],
    escalations: list[RuleHit],
    scores: ModelScores,
    harms: list[_Signal],
    t: PolicyThresholds,
    severe: SevereTable,
) -> PolicyResult:
    hate = scores.toxicity[2]
    toxic = min(1.0, max(0.0, 1.0 - scores.toxicity[0]))
    spam = scores.intent[2]
    ad = scores.intent[3]
    model_signals = _model_signals(hate, toxic, spam, ad, t) + harms
    standing = standing_flags(hits, scores, t)
    rule_reasons = (
        *rule_reasons,
        *(
            f"cleared_by_model:{hit.rule_id}"
            for hit in hits
            if hit.action is RuleAction.FLAG and hit not in standing
        ),
    )
    signals = model_signals + [
        _Signal(Decision.FLAG, hit.category, _SEVERITY_WEIGHT[hit.severity], f"rule:{hit.rule_id}")
        for hit in standing
    ]
    decision = max((s.level for s in signals), key=_LEVEL.__getitem__, default=Decision.ALLOW)
    drivers = [s for s in signals if s.level is decision and decision is not Decision.ALLOW]
    capped = [h.category for h in hits if h.category in severe.never_blocked]
    capped += [s.category for s in harms if s.category in severe.never_blocked]
    if decision is Decision.BLOCK and capped:
        decision = Decision.FLAG
        drivers = [s for s in signals if s.level is not Decision.ALLOW]
        rule_reasons = (*rule_reasons, f"never_block:{capped[0]}")

    model_escalation: _Signal | None = None
    if hate >= t.escalate_high and t.flag_hate < OFF_THRESHOLD:
        reason = f"severe:toxicity.hate={hate:.3f}"
        model_escalation = _Signal(Decision.ALLOW, "hate", _SEVERE_HATE_WEIGHT, reason)
    elif (
        (insult := scores.harm("insult")) is not None
        and toxic < insult
        and t.flag_insult < OFF_THRESHOLD
    ):
        if t.escalate_low <= insult < t.escalate_high:
            model_escalation = _Signal(
                Decision.ALLOW,
                "offensive",
                _OFFENSIVE_WEIGHT,
                f"grey_zone:harms.insult={insult:.3f}",
            )
    elif t.escalate_low <= toxic < t.escalate_high and t.flag_offensive < OFF_THRESHOLD:
        hateful = scores.toxicity[2] >= scores.toxicity[1]
        model_escalation = _Signal(
            Decision.ALLOW,
            "hate" if hateful else "offensive",
            _HATE_WEIGHT if hateful else _OFFENSIVE_WEIGHT,
            f"grey_zone:toxicity={toxic:.3f}",
        )
    escalators = [
        _Signal(Decision.ALLOW, hit.category, _SEVERITY_WEIGHT[hit.severity], f"rule:{hit.rule_id}")
        for hit in escalations
    ]
    # A severe harm escalates as a severe rule hit does, whatever the decision.
    escalators += [s for s in harms if severe.is_severe(s.category)]
    model_reasons = [s.reason for s in model_signals]
    if model_escalation is not None:
        escalators.append(model_escalation)
        model_reasons.append(model_escalation.reason)

    chosen = drivers or escalators
    category = max(chosen, key=lambda s: s.weight).category if chosen else None
    severity = max((s.weight for s in [*drivers, *escalators]), default=0.0)
    return PolicyResult(
        decision=decision,
        decided_by=DecidedBy.MODEL,
        escalate=bool(escalators),
        category=category,
        priority=_priority(severity, max(toxic, spam, ad, *(scores.harms or ()))),
        reasons=(*rule_reasons, *model_reasons),
    )


def standing_flags(
    hits: tuple[RuleHit, ...], scores: ModelScores | None, t: PolicyThresholds
) -> tuple[RuleHit, ...]:
    """The ``flag`` hits that count toward a FLAG: all of them, less those of ``yields_to_model``
    rules when the model clears them (module docstring; the harms, when the model has them, must
    be below ``model_clears_below`` too). Without scores nothing is cleared."""
    flags = tuple(hit for hit in hits if hit.action is RuleAction.FLAG)
    if scores is None or not any(hit.yields_to_model for hit in flags):
        return flags
    toxic = min(1.0, max(0.0, 1.0 - scores.toxicity[0]))
    harms = scores.harms or ()
    if max(toxic, scores.intent[2], scores.intent[3], *harms) >= t.model_clears_below:
        return flags
    return tuple(hit for hit in flags if not hit.yields_to_model)


def _model_signals(
    hate: float, toxic: float, spam: float, ad: float, t: PolicyThresholds
) -> list[_Signal]:
    signals: list[_Signal] = []
    if _reaches(hate, t.block_hate):
        signals.append(
            _Signal(Decision.BLOCK, "hate", _HATE_WEIGHT, _reason("hate", hate, t.block_hate))
        )
    elif _reaches(hate, t.flag_hate):
        signals.append(
            _Signal(Decision.FLAG, "hate", _HATE_WEIGHT, _reason("hate", hate, t.flag_hate))
        )
    if _reaches(toxic, t.block_offensive):
        signals.append(
            _Signal(
                Decision.BLOCK,
                "offensive",
                _OFFENSIVE_WEIGHT,
                _reason("offensive", toxic, t.block_offensive),
            )
        )
    elif _reaches(toxic, t.flag_offensive):
        signals.append(
            _Signal(
                Decision.FLAG,
                "offensive",
                _OFFENSIVE_WEIGHT,
                _reason("offensive", toxic, t.flag_offensive),
            )
        )
    if _reaches(spam, t.block_spam):
        signals.append(
            _Signal(Decision.BLOCK, "spam", _SPAM_WEIGHT, _reason("spam", spam, t.block_spam))
        )
    elif _reaches(spam, t.flag_spam):
        signals.append(
            _Signal(Decision.FLAG, "spam", _SPAM_WEIGHT, _reason("spam", spam, t.flag_spam))
        )
    if _reaches(ad, t.flag_advertisement):
        signals.append(
            _Signal(
                Decision.FLAG,
                "advertisement",
                _SPAM_WEIGHT,
                _reason("advertisement", ad, t.flag_advertisement),
            )
        )
    return signals


def _harm_signals(scores: ModelScores, t: PolicyThresholds) -> list[_Signal]:
    """The FLAG and BLOCK signals of the model's harms (none without the ``HARMS`` output)."""
    if scores.harms is None:
        return []
    signals: list[_Signal] = []
    for label, value in zip(HARM_LABELS, scores.harms, strict=True):
        category, weight = HARM_CATEGORIES[label], _HARM_WEIGHT[label]
        flag_at: float = getattr(t, f"flag_{label}")
        if label == "insult" and _reaches(value, t.block_insult):
            reason = _harm_reason(label, value, t.block_insult)
            signals.append(_Signal(Decision.BLOCK, category, weight, reason))
        elif _reaches(value, flag_at):
            signals.append(
                _Signal(Decision.FLAG, category, weight, _harm_reason(label, value, flag_at))
            )
    return signals


def _reaches(value: float, threshold: float) -> bool:
    """Whether a probability fires a flag or block threshold: at or above it, except that
    :data:`OFF_THRESHOLD` never fires (a category turned off)."""
    return threshold < OFF_THRESHOLD and value >= threshold


def _harm_reason(label: str, value: float, threshold: float) -> str:
    return f"harms.{label}={value:.3f}>={threshold:g}"


def model_flag_pairs(scores: ModelScores, t: PolicyThresholds) -> tuple[tuple[float, float], ...]:
    """Each model probability the policy flags on, with its flag threshold: ``1 - P(none)`` and
    ``flag_offensive``, ``P(hate)`` and ``flag_hate``, ``P(spam)`` and ``flag_spam``,
    ``P(advertisement)`` and ``flag_advertisement``, then, when the model has ``HARMS``, each harm
    and its ``flag_<harm>``. The model flags (or blocks) a message exactly when some probability
    reaches its threshold; for ranking by how far (``modelbuild.whole_decision.harm_score``)."""
    pairs = [
        (min(1.0, max(0.0, 1.0 - scores.toxicity[0])), t.flag_offensive),
        (scores.toxicity[2], t.flag_hate),
        (scores.intent[2], t.flag_spam),
        (scores.intent[3], t.flag_advertisement),
    ]
    if scores.harms is not None:
        pairs += [
            (value, float(getattr(t, f"flag_{label}")))
            for label, value in zip(HARM_LABELS, scores.harms, strict=True)
        ]
    return tuple(pairs)


_REASON_NAMES = {
    "hate": "toxicity.hate",
    "offensive": "toxicity.offensive_or_hate",
    "spam": "intent.spam",
    "advertisement": "intent.advertisement",
}


def _reason(category: str, value: float, threshold: float) -> str:
    return f"{_REASON_NAMES[category]}={value:.3f}>={threshold:g}"
