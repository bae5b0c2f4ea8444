"""Synthetic moderation history for ``bench.analytics``: verdicts, review items and events.

The distributions (a mid-size platform, 30 days by default, ending now):

- **time**: rows spread over the hours in proportion to a daily cycle (evening peak three times
  the early-morning trough) and busier weekends (x1.15), in time order within each hour;
- **groups**: 5,000 with Zipf(1.1) popularity (a few huge channels, a long tail); the Kafka
  partition is the group's (12 partitions, offsets increasing per partition);
- **senders**: 300,000 with Zipf(1.05) activity, each with three home groups (drawn by the
  groups' popularity) that take 90 % of their messages; one sender in 37 is an offender (30 % of
  their messages harmful, against 3 % for everyone else);
- **harm**: a harmful message falls in one of ten categories (offensive 34 %, spam 24 %, hate
  14 %, sexual 8 %, scam 7 %, threat 5 %, self_harm 3 %, self_harm_incitement 2 %,
  sexual_exploitation 2 %, sexual_exploitation_minors 1 %); per category a share is blocked by a
  rule at once (``rules``, no model call), the rest are decided by the model (flag, or block for
  30 %), often with a flagging rule hit; 1 % of benign messages carry a low-severity near miss.
  Rules come from a pool of 12 per category, Zipf-popular;
- **model outages**: two (40 and 60 minutes) during which verdicts not blocked by rules are
  ``pending_model``; 60 % of those were re-scored since, so they are stored as model verdicts;
- **escalations**: every severe category, 35 % of flags; review priority 0.5-1. Escalations older
  than three hours are resolved (97 %) after a log-normal wait (median 20 minutes), by 40
  moderators (Zipf), approve 35 % (10 % for severe harm), else remove/warn/mute/ban; 5 % go to
  the admins' queue first. Each item has its audit events: claim, often view_text, sometimes
  release and claim again, escalate_to_admin, the decision;
- **timings**: message-to-verdict latency log-normal (median 140 ms for the model, 15 ms for
  rules), 0.4 % negative (senders' clocks ahead) and 0.1 % minutes late (replays); queue and
  inference times log-normal; model version "3", then "4" for the last 12 days.

Rows are produced as PostgreSQL ``COPY`` text, one hour at a time (``VerdictHour``), with the
review items of that hour's escalations; events come last, once the items' ids are known.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt
import orjson

from pipelines import verdict_codec
from pipelines.tenants import DEFAULT_TENANT

__all__ = [
    "EVENT_COLUMNS",
    "REVIEW_ITEM_COLUMNS",
    "VERDICT_COLUMNS",
    "HistorySpec",
    "ItemReview",
    "ReviewItemSeed",
    "VerdictHour",
    "review_event_rows",
    "review_item_rows",
    "verdict_hours",
]

VERDICT_COLUMNS: tuple[str, ...] = (
    *verdict_codec.VERDICT_COLUMNS,
    "published",
    "created_at",
    "updated_at",
)
"""The ``verdicts`` columns written (``rollup_xid`` is left to its default, as in production)."""

REVIEW_ITEM_COLUMNS: tuple[str, ...] = (
    "source_topic",
    "source_partition",
    "source_offset",
    "sent_at",
    "message_id",
    "group_id",
    "sender_id",
    "message_text",
    "category",
    "priority",
    "auto_decision",
    "reasons",
    "queue",
    "status",
    "claimed_by",
    "claimed_at",
    "claim_expires_at",
    "resolution",
    "resolved_by",
    "resolved_at",
    "created_at",
)

EVENT_COLUMNS: tuple[str, ...] = (
    "review_item_id",
    "actor",
    "action",
    "reason",
    "details",
    "created_at",
)

_CATEGORIES = (
    "offensive",
    "spam",
    "hate",
    "sexual",
    "scam",
    "threat",
    "self_harm",
    "self_harm_incitement",
    "sexual_exploitation",
    "sexual_exploitation_minors",
)
_CATEGORY_SHARE = (0.34, 0.24, 0.14, 0.08, 0.07, 0.05, 0.03, 0.02, 0.02, 0.01)
_RULE_BLOCKED = (0.1, 0.8, 0.3, 0.4, 0.7, 0.2, 0.0, 0.6, 0.6, 0.9)
"""Per category: the share of harmful messages a rule blocks outright."""
_SEVERE = frozenset(
    {
        "self_harm",
        "sexual_exploitation_minors",
        "threat",
        "sexual_exploitation",
        "self_harm_incitement",
    }
)
_RESOLUTIONS = ("remove_message", "warn", "mute", "ban")
_RESOLUTION_SHARE = (0.4, 0.25, 0.15, 0.2)
_Array = npt.NDArray[np.float64]
_PARTITIONS = 12
_MODERATORS = 40
_NULL = "\\N"


@dataclass(frozen=True, slots=True)
class HistorySpec:
    """What to generate; ``end`` is the newest row's time (now, normally)."""

    rows: int
    end: datetime
    days: int = 30
    groups: int = 5_000
    senders: int = 300_000
    seed: int = 25

    @property
    def start(self) -> datetime:
        return self.end - timedelta(days=self.days)


@dataclass(slots=True)
class ReviewItemSeed:
    """An escalation of a generated verdict, with what its review looked like."""

    topic: str
    partition: int
    offset: int
    sent_at: datetime
    created_at: datetime
    group_id: str
    sender_id: str
    category: str
    priority: float
    decision: str
    reasons: str


@dataclass(slots=True)
class VerdictHour:
    """One hour of verdict rows as COPY text, and its escalations."""

    hour: datetime
    rows: int
    copy_text: bytes
    escalations: list[ReviewItemSeed] = field(default_factory=list)


def _zipf_cdf(n: int, exponent: float) -> _Array:
    weights = 1.0 / np.arange(1, n + 1) ** exponent
    cdf: _Array = np.cumsum(weights / weights.sum())
    return cdf


def _hour_weights(spec: HistorySpec) -> list[tuple[datetime, float]]:
    first = spec.start.replace(minute=0, second=0, microsecond=0)
    hours = []
    moment = first
    while moment < spec.end:
        cycle = 1 + 0.5 * math.sin(2 * math.pi * (moment.hour - 14) / 24)
        weekend = 1.15 if moment.weekday() >= 5 else 1.0
        hours.append((moment, cycle * weekend))
        moment += timedelta(hours=1)
    return hours


def _rows_per_hour(spec: HistorySpec) -> list[tuple[datetime, int]]:
    weights = _hour_weights(spec)
    total = sum(w for _, w in weights)
    counts = [int(spec.rows * w / total) for _, w in weights]
    for i in range(spec.rows - sum(counts)):
        counts[i % len(counts)] += 1
    return [(hour, n) for (hour, _), n in zip(weights, counts, strict=True)]


def _score_pool(rng: np.random.Generator, harmful: bool) -> list[tuple[str, str, str, str]]:
    """(scores JSON, sentiment, intent, toxicity labels) variants, like the model's output."""
    pool = []
    for _ in range(64):
        tox = rng.dirichlet((1, 3, 6) if harmful else (20, 1.5, 0.5))
        sent = rng.dirichlet((4, 3, 1) if harmful else (1, 4, 3))
        intent = rng.dirichlet((6, 1, 2, 1) if harmful else (12, 4, 1, 1))
        scores = {
            "sentiment": dict(
                zip(("negative", "neutral", "positive"), sent.round(4).tolist(), strict=True)
            ),
            "intent": dict(
                zip(
                    ("chat", "question", "spam", "advertisement"),
                    intent.round(4).tolist(),
                    strict=True,
                )
            ),
            "toxicity": dict(
                zip(("none", "offensive", "hate"), tox.round(4).tolist(), strict=True)
            ),
        }
        labels = [max(part, key=part.__getitem__) for part in scores.values()]
        pool.append((orjson.dumps(scores).decode(), labels[0], labels[1], labels[2]))
    return pool


def _rule(category: str, rank: int, action: str) -> str:
    severity = (
        "critical"
        if category == "sexual_exploitation_minors"
        else ("high" if category in _SEVERE or category == "hate" else "medium")
    )
    if action == "near":
        return orjson.dumps(
            [
                {
                    "rule_id": f"near.{category}.{rank}",
                    "category": category,
                    "severity": "low",
                    "action": "flag",
                }
            ]
        ).decode()
    return orjson.dumps(
        [
            {
                "rule_id": f"{category}.{rank}",
                "category": category,
                "severity": severity,
                "action": action,
            }
        ]
    ).decode()


def _iso(moments: npt.NDArray[np.datetime64]) -> list[str]:
    """``datetime64[us]`` UTC moments as COPY text."""
    return [f"{s}+00" for s in np.datetime_as_string(moments, unit="us")]


def verdict_hours(spec: HistorySpec) -> Iterator[VerdictHour]:
    """The history, hour by hour, oldest first."""
    rng = np.random.default_rng(spec.seed)
    group_cdf = _zipf_cdf(spec.groups, 1.1)
    sender_cdf = _zipf_cdf(spec.senders, 1.05)
    category_cdf = np.cumsum(_CATEGORY_SHARE)
    rule_cdf = _zipf_cdf(12, 1.2)
    harmful_scores = _score_pool(rng, True)
    benign_scores = _score_pool(rng, False)
    rollout = spec.end - timedelta(days=12)
    outages = (
        (spec.end - timedelta(days=9, hours=6), timedelta(minutes=40)),
        (spec.end - timedelta(days=21, hours=17), timedelta(minutes=60)),
    )
    homes = np.minimum(np.searchsorted(group_cdf, rng.random((spec.senders, 3))), spec.groups - 1)
    offsets = [0] * _PARTITIONS
    batch_ids = [str(uuid.UUID(int=int(x))) for x in rng.integers(0, 2**62, 4096)]
    for hour, count in _rows_per_hour(spec):
        if count == 0:
            continue
        yield _one_hour(
            hour,
            count,
            spec,
            rng,
            group_cdf,
            sender_cdf,
            category_cdf,
            rule_cdf,
            harmful_scores,
            benign_scores,
            rollout,
            outages,
            homes,
            offsets,
            batch_ids,
        )


def _one_hour(
    hour: datetime,
    count: int,
    spec: HistorySpec,
    rng: np.random.Generator,
    group_cdf: _Array,
    sender_cdf: _Array,
    category_cdf: _Array,
    rule_cdf: _Array,
    harmful_scores: list[tuple[str, str, str, str]],
    benign_scores: list[tuple[str, str, str, str]],
    rollout: datetime,
    outages: tuple[tuple[datetime, timedelta], ...],
    homes: npt.NDArray[np.int64],
    offsets: list[int],
    batch_ids: list[str],
) -> VerdictHour:
    base = np.datetime64(hour.replace(tzinfo=None), "us")
    span_us = min(3_600_000_000, int((spec.end - hour).total_seconds() * 1e6))
    sent = base + np.sort(rng.integers(0, max(1, span_us), count)).astype("timedelta64[us]")
    senders = np.minimum(np.searchsorted(sender_cdf, rng.random(count)), spec.senders - 1)
    anywhere = np.minimum(np.searchsorted(group_cdf, rng.random(count)), spec.groups - 1)
    at_home = homes[senders, rng.integers(0, homes.shape[1], count)]
    groups = np.where(rng.random(count) < 0.9, at_home, anywhere)
    offender = senders % 37 == 0
    harmful = rng.random(count) < np.where(offender, 0.30, 0.03)
    category = np.minimum(np.searchsorted(category_cdf, rng.random(count)), len(_CATEGORIES) - 1)
    blocked_by_rule = harmful & (rng.random(count) < np.take(_RULE_BLOCKED, category))
    model_blocks = rng.random(count) < 0.3
    rule_rank = np.minimum(np.searchsorted(rule_cdf, rng.random(count)), 11)
    with_hit = rng.random(count)
    escalate_draw = rng.random(count)
    pick = rng.integers(0, 64, count)
    in_outage = np.zeros(count, dtype=bool)
    for began, length in outages:
        lo = np.datetime64(began.replace(tzinfo=None), "us")
        hi = lo + np.timedelta64(int(length.total_seconds() * 1e6), "us")
        in_outage |= (sent >= lo) & (sent < hi)
    still_pending = in_outage & (rng.random(count) < 0.4)
    latency_ms = np.where(
        blocked_by_rule | still_pending,
        rng.lognormal(math.log(15), 0.5, count),
        rng.lognormal(math.log(140), 0.6, count),
    )
    skew = rng.random(count)
    latency_ms = np.where(skew < 0.004, -rng.uniform(1, 3000, count), latency_ms)
    latency_ms = np.where(skew > 0.999, rng.uniform(60_000, 1_800_000, count), latency_ms)
    created = sent + (latency_ms * 1000).astype("timedelta64[us]")
    queue_ms = np.where(
        blocked_by_rule, rng.lognormal(math.log(2), 0.5, count), rng.lognormal(3.2, 0.7, count)
    )
    inference_ms = rng.lognormal(math.log(45), 0.5, count)
    priority = rng.uniform(0.5, 1.0, count)
    sent_text = _iso(sent)
    created_text = _iso(created)
    version = "4" if hour >= rollout else "3"
    lines: list[str] = []
    escalations: list[ReviewItemSeed] = []
    for i in range(count):
        g = int(groups[i])
        partition = g % _PARTITIONS
        offset = offsets[partition]
        offsets[partition] = offset + 1
        hits = "[]"
        reasons = "{}"
        scores, sentiment, intent, toxicity = _NULL, _NULL, _NULL, _NULL
        model_name = model_version = batch = inference = _NULL
        cat_name = _CATEGORIES[int(category[i])]
        if harmful[i] and blocked_by_rule[i]:
            decision, decided_by, cat = "block", "rules", cat_name
            hits = _rule(cat_name, int(rule_rank[i]), "block")
            reasons = f"{{rule:{cat_name}.{int(rule_rank[i])}}}"
        else:
            if still_pending[i]:
                decided_by = "pending_model"
            else:
                decided_by = "model"
                scores, sentiment, intent, toxicity = (
                    harmful_scores if harmful[i] else benign_scores
                )[int(pick[i])]
                model_name, model_version = "moderation", version
                batch = batch_ids[(offset // 100) % len(batch_ids)]
                inference = f"{inference_ms[i]:.2f}"
            if harmful[i]:
                cat = cat_name
                decision = "block" if model_blocks[i] and cat_name != "self_harm" else "flag"
                if decided_by == "pending_model":
                    decision = "flag"
                if with_hit[i] < 0.5 or decided_by == "pending_model":
                    hits = _rule(cat_name, int(rule_rank[i]), "flag")
                    reasons = f"{{rule:{cat_name}.{int(rule_rank[i])}}}"
                else:
                    reasons = f"{{toxicity.{cat_name}>=0.80}}"
            else:
                decision, cat = "allow", None
                if with_hit[i] < 0.01:
                    hits = _rule(cat_name, int(rule_rank[i]), "near")
        escalated = harmful[i] and (
            cat_name in _SEVERE or (decision == "flag" and escalate_draw[i] < 0.35)
        )
        sender = f"user-{int(senders[i])}"
        group = f"group-{g}"
        lines.append(
            "\t".join(
                (
                    "chat.messages",
                    str(partition),
                    str(offset),
                    sent_text[i],
                    f"m{partition}-{offset}",
                    group,
                    sender,
                    f"{offset:064x}",
                    decision,
                    decided_by,
                    "t" if escalated else "f",
                    cat if cat is not None else _NULL,
                    f"{priority[i]:.3f}" if escalated else "0",
                    reasons,
                    hits,
                    scores,
                    sentiment,
                    intent,
                    toxicity,
                    model_name,
                    model_version,
                    batch,
                    f"{queue_ms[i]:.2f}",
                    inference,
                    _NULL,  # model_spans
                    DEFAULT_TENANT,
                    "t",
                    created_text[i],
                    created_text[i],
                )
            )
        )
        if escalated:
            escalations.append(
                ReviewItemSeed(
                    "chat.messages",
                    partition,
                    offset,
                    _as_datetime(sent[i]),
                    _as_datetime(created[i]),
                    group,
                    sender,
                    cat_name,
                    float(priority[i]),
                    decision,
                    reasons,
                )
            )
    text = "\n".join(lines) + "\n"
    return VerdictHour(hour, count, text.encode(), escalations)


def _as_datetime(moment: np.datetime64) -> datetime:
    micros = int(moment.astype("datetime64[us]").astype(np.int64))
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


def _copy_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


@dataclass(frozen=True, slots=True)
class ItemReview:
    """How one generated escalation was reviewed (for its row and its audit events)."""

    status: str
    queue: str
    moderator: str
    resolution: str | None
    resolved_at: datetime | None
    relaunched: bool
    viewed: bool


def _review(seed: ReviewItemSeed, end: datetime, rng: np.random.Generator) -> ItemReview:
    draws = rng.random(6)
    moderator = f"mod-{min(int(_MODERATORS * draws[0] ** 2), _MODERATORS - 1)}"
    queue = "admin" if draws[1] < 0.05 else "moderator"
    wait = timedelta(minutes=max(5.0, float(rng.lognormal(math.log(20), 1.1))))
    resolved_at = seed.created_at + wait
    recent = seed.created_at > end - timedelta(hours=3)
    if resolved_at > end or (recent and draws[2] < 0.75) or (not recent and draws[2] < 0.03):
        status = "claimed" if draws[3] < 0.25 else "open"
        return ItemReview(status, queue, moderator, None, None, False, draws[4] < 0.7)
    approve_share = 0.1 if seed.category in _SEVERE else 0.35
    if draws[3] < approve_share:
        resolution = "approve"
    else:
        resolution = _RESOLUTIONS[
            int(np.searchsorted(np.cumsum(_RESOLUTION_SHARE), draws[4] * 0.9999))
        ]
    return ItemReview(
        "resolved", queue, moderator, resolution, resolved_at, draws[5] < 0.08, draws[4] < 0.7
    )


def review_item_rows(
    seeds: list[ReviewItemSeed], end: datetime, seed: int
) -> tuple[bytes, list[ItemReview]]:
    """COPY text of the review items (in ``seeds`` order, so their ids are 1..n in a fresh
    table), and how each was reviewed."""
    rng = np.random.default_rng(seed + 1)
    reviews = [_review(s, end, rng) for s in seeds]
    lines = []
    for i, (s, r) in enumerate(zip(seeds, reviews, strict=True)):
        claimed = r.status == "claimed"
        claimed_at = s.created_at + timedelta(minutes=1)
        lines.append(
            "\t".join(
                (
                    s.topic,
                    str(s.partition),
                    str(s.offset),
                    _copy_time(s.sent_at),
                    f"m{s.partition}-{s.offset}",
                    s.group_id,
                    s.sender_id,
                    f"synthetic message {i}",
                    s.category,
                    f"{s.priority:.3f}",
                    s.decision,
                    s.reasons,
                    r.queue,
                    r.status,
                    r.moderator if claimed else _NULL,
                    _copy_time(claimed_at) if claimed else _NULL,
                    _copy_time(claimed_at + timedelta(minutes=10)) if claimed else _NULL,
                    r.resolution or _NULL,
                    r.moderator if r.resolved_at else _NULL,
                    _copy_time(r.resolved_at) if r.resolved_at else _NULL,
                    _copy_time(s.created_at),
                )
            )
        )
    return ("\n".join(lines) + "\n").encode(), reviews


def review_event_rows(seeds: list[ReviewItemSeed], reviews: list[ItemReview]) -> bytes:
    """COPY text of every item's audit events (item ids 1..n, as ``review_item_rows`` made)."""
    lines = []
    for item_id, (s, r) in enumerate(zip(seeds, reviews, strict=True), start=1):
        role = orjson.dumps({"role": "admin" if r.queue == "admin" else "moderator"}).decode()
        steps: list[tuple[str, str, timedelta]] = []
        if r.queue == "admin":
            steps.append(("mod-0", "escalate_to_admin", timedelta(seconds=30)))
        if r.status != "open" or r.resolved_at is not None:
            steps.append((r.moderator, "claim", timedelta(minutes=1)))
            if r.relaunched:
                steps.append((r.moderator, "release", timedelta(minutes=2)))
                steps.append((r.moderator, "claim", timedelta(minutes=3)))
            if r.viewed:
                steps.append((r.moderator, "view_text", timedelta(minutes=4)))
        for actor, action, after in steps:
            lines.append(
                "\t".join(
                    (str(item_id), actor, action, _NULL, role, _copy_time(s.created_at + after))
                )
            )
        if r.resolved_at is not None and r.resolution is not None:
            lines.append(
                "\t".join(
                    (
                        str(item_id),
                        r.moderator,
                        r.resolution,
                        "checked",
                        role,
                        _copy_time(r.resolved_at),
                    )
                )
            )
    return ("\n".join(lines) + "\n").encode()
