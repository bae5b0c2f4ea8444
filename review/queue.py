"""The review queue in PostgreSQL: listing, exclusive claims with expiry, decisions, context.

Items are named by their opaque ``public_id`` (a random UUID) in every argument and answer; the
sequential ``id`` stays inside the database. A user's queues are the queues of their role
(moderators: ``moderator``; admins: both) narrowed to their categories (``review_users.categories``,
NULL = all); every listing, claim, decision, audit read and context text obeys them. Message text
is shown only to the holder of the item's live claim (or an admin), and each showing appends a
``view_text`` audit event.
Order: items in an urgent category (``pipelines.severe_harm.URGENT_CATEGORIES``: the writer's
own self-harm, sexual exploitation of minors) first, then by rank (priority plus repeat-offender,
age and confidence boosts), then confidence, then age.

A claim is a row state, not a lock held by a connection: ``status = 'claimed'`` with
``claim_expires_at``. Every query treats a claim past its expiry as open, so an abandoned item
returns to the queue without a sweeper. Claims take the row with ``FOR UPDATE SKIP LOCKED`` (or a
conditional ``UPDATE`` that re-checks after the row lock), so two moderators never hold one item.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

from common.logs import get_logger
from pipelines.scores import HARM_LABELS
from pipelines.severe_harm import URGENT_CATEGORIES
from review.appeal_records import SELECT_APPEAL, appeal_view
from review.conversation import conversation_window
from review.decisions import encode_payload
from review.errors import (
    ClaimLimitError,
    ClaimRequiredError,
    ForbiddenQueueError,
    InvalidDecisionError,
    ItemClaimedError,
    ItemNotFoundError,
    ItemResolvedError,
    OwnDecisionError,
)
from review.schemas import (
    APPEALS_QUEUE,
    Action,
    AppealEvidence,
    AuditEvent,
    ClaimResult,
    ConversationMessage,
    DecisionResult,
    ItemContext,
    QueueCount,
    QueueDepth,
    QueueFilter,
    QueueItem,
    Role,
    Strike,
    User,
    VerdictDetail,
)
from review.settings import ReviewSettings
from review.strikes import STRIKE_WEIGHTS

__all__ = ["QUEUES", "Conn", "ReviewQueue"]

_log = get_logger(__name__)

QUEUES: tuple[str, ...] = ("moderator", "admin", APPEALS_QUEUE)
"""Every queue an item can be in (``review_items.queue``'s CHECK constraint)."""

# SQL below is assembled only from the constants in this module (noqa: S608); every value
# arrives as a bind parameter.

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

Conn: TypeAlias = "asyncpg.Connection[Any] | PoolConnectionProxy[Any]"
"""A plain connection or one borrowed from a pool."""

# A claim counts only while it has not expired. An item is finished when a person resolved it or
# a rescan closed it (its verdict no longer escalated); finished items leave every queue.
_LIVE_CLAIM = "(r.status = 'claimed' AND r.claim_expires_at > now())"
_UNFINISHED = "(r.status IN ('open', 'claimed'))"
_AVAILABLE = f"({_UNFINISHED} AND NOT {_LIVE_CLAIM})"
_FINISHED = ("resolved", "closed")

# The highest harmful probability the model gave (0 when no model scored the message), the
# harms included when the model had that output (absent keys read 0).
_HARM_PROBABILITIES = "".join(
    f",\n    COALESCE((v.scores -> 'harms' ->> '{label}')::real, 0)" for label in HARM_LABELS
)
_CONFIDENCE = f"""GREATEST(
    COALESCE((v.scores -> 'toxicity' ->> 'hate')::real, 0),
    COALESCE((v.scores -> 'toxicity' ->> 'offensive')::real, 0),
    COALESCE((v.scores -> 'intent' ->> 'spam')::real, 0),
    COALESCE((v.scores -> 'intent' ->> 'advertisement')::real, 0){_HARM_PROBABILITIES})"""

_AGE_S = "EXTRACT(EPOCH FROM now() - r.created_at)::double precision"

# $1 repeat-offender weight per strike, $2 age weight per hour, $3 confidence weight.
_RANK = f"""(r.priority
    + $1::double precision * LEAST(st.total, 5)
    + $2::double precision * LEAST({_AGE_S} / 3600.0, 24)
    + $3::double precision * {_CONFIDENCE})"""

_FROM = """review_items r
    LEFT JOIN verdicts v
        ON v.source_topic = r.source_topic AND v.source_partition = r.source_partition
       AND v.source_offset = r.source_offset AND v.sent_at = r.sent_at
    LEFT JOIN LATERAL (
        SELECT COALESCE(sum(s.weight), 0)::integer AS total FROM sender_strikes s
        WHERE s.sender_id = r.sender_id AND s.tenant = r.tenant
          AND s.expires_at > now()) st ON true"""


def _member(queues: int, categories: int, tenants: int) -> str:
    """SQL: the item ``r`` is in the user's queues and tenants (bind numbers of the three array
    parameters: ``User.queues``, ``User.category_list``, ``User.tenant_list``)."""
    return (
        f"(r.queue = ANY(${queues}::text[]) AND (${categories}::text[] IS NULL "
        f"OR r.category = ANY(${categories}::text[])) AND (${tenants}::text[] IS NULL "
        f"OR r.tenant = ANY(${tenants}::text[])))"
    )


# An appeal of the user's own decision is someone else's to handle ($10: the user's name).
_NOT_OWN_APPEAL = """NOT EXISTS (SELECT 1 FROM appeals a
    WHERE a.review_item_id = r.id AND a.original_moderator = $10)"""

# Filters: $4 queues, $5 category, $6 group, $7 min age s, $8 max age s, $9 user's categories,
# $10 user's name, $11 user's tenants.
_FILTERS = f"""{_member(4, 9, 11)}
    AND ($5::text IS NULL OR r.category = $5)
    AND ($6::text IS NULL OR r.group_id = $6)
    AND ($7::double precision IS NULL OR {_AGE_S} >= $7)
    AND ($8::double precision IS NULL OR {_AGE_S} <= $8)
    AND {_NOT_OWN_APPEAL}"""

# Urgent categories come before any rank (the names are constants, never user input).
_URGENT = "COALESCE(r.category IN ({}), false)".format(
    ", ".join(f"'{category}'" for category in sorted(URGENT_CATEGORIES))
)

_ORDER = f"ORDER BY {_URGENT} DESC, {_RANK} DESC, {_CONFIDENCE} DESC, r.created_at, r.id"


def _jsonb(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _public_id(ref: str) -> uuid.UUID:
    """The UUID an item reference names; anything else (old sequential ids too) is not found."""
    try:
        return uuid.UUID(ref)
    except ValueError:
        raise ItemNotFoundError(f"review item {ref[:64]!r} does not exist") from None


def _outside(ref: str, queue: str, category: str | None) -> ForbiddenQueueError:
    return ForbiddenQueueError(
        f"item {ref} is in a queue you do not work ({queue} queue, category {category or '-'})"
    )


class ReviewQueue:
    """Repository over ``review_items``, ``review_events``, ``sender_strikes`` and the outbox."""

    def __init__(self, pool: asyncpg.Pool[Any], settings: ReviewSettings) -> None:
        self._pool = pool
        self._settings = settings
        self._denials: set[asyncio.Task[None]] = set()
        """Denials being recorded (``check_tenant``): held so they run to the end."""

    def _rank_args(self) -> list[float]:
        s = self._settings
        return [s.repeat_offender_weight, s.age_weight_per_hour, s.confidence_weight]

    def _filter_args(self, user: User, flt: QueueFilter) -> list[Any]:
        queues = user.queues
        if flt.queue is not None:
            if flt.queue not in queues:
                raise ForbiddenQueueError(f"queue {flt.queue!r} is not open to {user.role.value}s")
            queues = [flt.queue]
        return [
            *self._rank_args(),
            queues,
            flt.category,
            flt.group_id,
            flt.min_age_s,
            flt.max_age_s,
            user.category_list,
            user.name,
            user.tenant_list,
        ]

    async def list_items(self, user: User, flt: QueueFilter) -> list[QueueItem]:
        """Open items (and live claims when asked) the user may work, best first."""
        status_cond = _UNFINISHED if flt.include_claimed else _AVAILABLE
        sql = f"""
            SELECT r.public_id::text AS id, r.queue, r.category, r.group_id, r.sender_id,
                   r.message_id, r.priority, r.created_at, r.sent_at,
                   CASE WHEN {_LIVE_CLAIM} THEN 'claimed' ELSE 'open' END AS status,
                   CASE WHEN {_LIVE_CLAIM} THEN r.claimed_by END AS claimed_by,
                   CASE WHEN {_LIVE_CLAIM} THEN r.claim_expires_at END AS claim_expires_at,
                   {_CONFIDENCE} AS confidence, st.total AS sender_strikes,
                   {_AGE_S} AS age_s, {_RANK} AS rank
            FROM {_FROM}
            WHERE {status_cond} AND {_FILTERS}
            {_ORDER}
            LIMIT $12"""  # noqa: S608
        rows = await self._pool.fetch(sql, *self._filter_args(user, flt), flt.limit)
        return [QueueItem(**dict(row)) for row in rows]

    async def counts(self, user: User) -> list[QueueCount]:
        """Open and live-claimed items per queue and category."""
        rows = await self._pool.fetch(
            f"""
            SELECT r.queue, r.category,
                   count(*) FILTER (WHERE NOT {_LIVE_CLAIM})::integer AS open,
                   count(*) FILTER (WHERE {_LIVE_CLAIM})::integer AS claimed
            FROM review_items r
            WHERE {_UNFINISHED} AND {_member(1, 2, 3)}
            GROUP BY r.queue, r.category
            ORDER BY r.queue DESC, r.category NULLS LAST""",  # noqa: S608
            user.queues,
            user.category_list,
            user.tenant_list,
        )
        return [QueueCount(**dict(row)) for row in rows]

    async def depth(self) -> list[QueueDepth]:
        """Every queue's backlog (every queue, even when empty, every tenant: the service's
        metrics), whoever may work it; overdue items are past their queue's target
        (``review.*_target_s``; an appeal: its deadline)."""
        targets = self._settings.queue_targets_s
        queues = list(QUEUES)
        rows = await self._pool.fetch(
            f"""
            SELECT q.queue,
                   count(r.id) FILTER (WHERE NOT {_LIVE_CLAIM})::integer AS open,
                   count(r.id) FILTER (WHERE {_LIVE_CLAIM})::integer AS claimed,
                   COALESCE(EXTRACT(EPOCH FROM now() - min(r.created_at)), 0)::double precision
                       AS oldest_age_s,
                   count(r.id) FILTER (WHERE COALESCE(
                       a.due_at, r.created_at + make_interval(secs => q.target_s)) < now()
                   )::integer AS overdue
            FROM unnest($1::text[], $2::double precision[]) AS q(queue, target_s)
                LEFT JOIN review_items r ON r.queue = q.queue AND {_UNFINISHED}
                LEFT JOIN appeals a ON a.review_item_id = r.id
            GROUP BY q.queue
            ORDER BY q.queue""",  # noqa: S608
            queues,
            [float(targets[queue]) for queue in queues],
        )
        return [QueueDepth(**dict(row)) for row in rows]

    async def my_claims(self, user: User) -> list[QueueItem]:
        """The items the user holds a live claim on."""
        rows = await self._pool.fetch(
            f"""
            SELECT r.public_id::text AS id, r.queue, r.category, r.group_id, r.sender_id,
                   r.message_id, r.priority, r.created_at, r.sent_at, 'claimed' AS status,
                   r.claimed_by, r.claim_expires_at, {_CONFIDENCE} AS confidence,
                   st.total AS sender_strikes, {_AGE_S} AS age_s, {_RANK} AS rank
            FROM {_FROM}
            WHERE {_LIVE_CLAIM} AND r.claimed_by = $4
            ORDER BY r.claim_expires_at""",  # noqa: S608
            *self._rank_args(),
            user.name,
        )
        return [QueueItem(**dict(row)) for row in rows]

    async def _check_claim_budget(self, conn: Conn, user: User) -> None:
        # Serialise one user's claims so concurrent requests cannot overshoot the bound.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('modstream.review.claims:' || $1, 0))",
            user.name,
        )
        held = await conn.fetchval(
            "SELECT count(*) FROM review_items r WHERE r.claimed_by = $1 AND "  # noqa: S608
            + _LIVE_CLAIM,
            user.name,
        )
        if held >= self._settings.max_claims_per_user:
            raise ClaimLimitError(
                f"{user.name} already holds {held} claims "
                f"(limit {self._settings.max_claims_per_user})"
            )

    async def _take(self, conn: Conn, user: User, item_id: int) -> ClaimResult:
        row = await conn.fetchrow(
            "UPDATE review_items SET status = 'claimed', claimed_by = $2, claimed_at = now(), "
            "claim_expires_at = now() + make_interval(secs => $3) WHERE id = $1 "
            "RETURNING claim_expires_at, public_id::text",
            item_id,
            user.name,
            float(self._settings.claim_ttl_s),
        )
        assert row is not None
        await self.append_event(
            conn, item_id, user, "claim", None, {"expires_at": row[0].isoformat()}
        )
        return ClaimResult(item_id=row[1], claimed_by=user.name, claim_expires_at=row[0])

    async def claim(self, user: User, ref: str) -> ClaimResult:
        """Claim one item; renewing a claim the user already holds extends its expiry."""
        public_id = _public_id(ref)
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT r.id, r.queue, r.category, r.status, r.claimed_by, r.tenant, "  # noqa: S608
                f"{_LIVE_CLAIM} AS live FROM review_items r WHERE r.public_id = $1 FOR UPDATE",
                public_id,
            )
            if row is None:
                raise ItemNotFoundError(f"review item {public_id} does not exist")
            await self.check_tenant(user, public_id, row, "claim")
            if not user.works(row["queue"], row["category"]):
                raise _outside(str(public_id), row["queue"], row["category"])
            if row["status"] in _FINISHED:
                raise ItemResolvedError(f"item {public_id} is already {row['status']}")
            await self.check_not_own_appeal(conn, user, row["id"], row["queue"])
            mine = row["live"] and row["claimed_by"] == user.name
            if row["live"] and not mine:
                raise ItemClaimedError(f"item {public_id} is claimed by someone else")
            if not mine:
                await self._check_claim_budget(conn, user)
            return await self._take(conn, user, row["id"])

    async def claim_next(self, user: User, flt: QueueFilter) -> ClaimResult | None:
        """Claim the best available item matching ``flt``; ``None`` when the queue is empty."""
        async with self._pool.acquire() as conn, conn.transaction():
            await self._check_claim_budget(conn, user)
            item_id = await conn.fetchval(
                f"""
                SELECT r.id FROM {_FROM}
                WHERE {_AVAILABLE} AND {_FILTERS}
                {_ORDER}
                LIMIT 1
                FOR UPDATE OF r SKIP LOCKED""",  # noqa: S608
                *self._filter_args(user, flt),
            )
            if item_id is None:
                return None
            return await self._take(conn, user, item_id)

    async def release(self, user: User, ref: str) -> None:
        """Give a claimed item back to the queue."""
        async with self._pool.acquire() as conn, conn.transaction():
            item = await self.locked_claim(conn, user, ref)
            await conn.execute(
                "UPDATE review_items SET status = 'open', claimed_by = NULL, claimed_at = NULL, "
                "claim_expires_at = NULL WHERE id = $1",
                item["id"],
            )
            await self.append_event(conn, item["id"], user, "release", None, {})

    @staticmethod
    async def check_not_own_appeal(conn: Conn, user: User, item_id: int, queue: str) -> None:
        """Refuse (``own_decision``) the moderator whose decision the appeal item contests."""
        if queue != APPEALS_QUEUE:
            return
        moderator = await conn.fetchval(
            "SELECT original_moderator FROM appeals WHERE review_item_id = $1", item_id
        )
        if moderator is not None and moderator == user.name:
            raise OwnDecisionError(
                "this appeal contests your own decision: another moderator must handle it"
            )

    async def locked_claim(self, conn: Conn, user: User, ref: str) -> asyncpg.Record:
        public_id = _public_id(ref)
        row = await conn.fetchrow(
            f"SELECT r.*, {_LIVE_CLAIM} AS live FROM review_items r "  # noqa: S608
            "WHERE r.public_id = $1 FOR UPDATE",
            public_id,
        )
        if row is None:
            raise ItemNotFoundError(f"review item {public_id} does not exist")
        await self.check_tenant(user, public_id, row, "claimed_action")
        if not user.works(row["queue"], row["category"]):
            raise _outside(str(public_id), row["queue"], row["category"])
        if row["status"] in _FINISHED:
            raise ItemResolvedError(f"item {public_id} is already {row['status']}")
        await self.check_not_own_appeal(conn, user, row["id"], row["queue"])
        if not (row["live"] and row["claimed_by"] == user.name):
            raise ClaimRequiredError(f"claim item {public_id} first (a claim may have expired)")
        locked: asyncpg.Record = row
        return locked

    async def check_tenant(
        self, user: User, public_id: uuid.UUID, row: asyncpg.Record, action: str
    ) -> None:
        """Answer an item of a tenant ``user`` is not bound to exactly as one that does not
        exist (so ids cannot be probed), and record the attempt in ``access_denials``: on a
        connection of its own (the caller's transaction is about to roll back), in the
        background, so the answer comes as soon as an unknown id's would."""
        if user.sees_tenant(row["tenant"]):
            return
        self._note_denial(user, action, row["tenant"], row["id"])
        raise ItemNotFoundError(f"review item {public_id} does not exist")

    def _note_denial(self, user: User, action: str, tenant: str, item_id: int) -> None:
        """Log and record (in the background) an attempt on another tenant's item."""
        _log.warning("review_other_tenant_item", actor=user.name, action=action)
        task = asyncio.create_task(
            self._record_denial(user, action, tenant, item_id), name="review-access-denial"
        )
        self._denials.add(task)
        task.add_done_callback(self._denials.discard)

    async def _record_denial(self, user: User, action: str, tenant: str, item_id: int) -> None:
        try:
            await self._pool.execute(
                "INSERT INTO access_denials (service, actor, actor_role, action, tenant, item_id) "
                "VALUES ('review', $1, $2, $3, $4, $5)",
                user.name,
                user.role.value,
                action,
                tenant,
                item_id,
            )
        except Exception as exc:  # the refusal stands; the log line above keeps the attempt
            _log.warning("review_denial_not_recorded", error=type(exc).__name__)

    async def append_event(
        self,
        conn: Conn,
        item_id: int,
        user: User,
        action: str,
        reason: str | None,
        details: dict[str, Any],
    ) -> tuple[int, datetime]:
        row = await conn.fetchrow(
            "INSERT INTO review_events (review_item_id, actor, action, reason, details) "
            "VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING id, created_at",
            item_id,
            user.name,
            action,
            reason,
            encode_payload({"role": user.role.value, **details}),
        )
        assert row is not None
        return row["id"], row["created_at"]

    def check_reason(self, reason: str) -> None:
        """Refuse an empty reason or one over ``review.max_reason_chars``."""
        if not reason.strip():
            raise InvalidDecisionError("a decision needs a reason")
        limit = self._settings.max_reason_chars
        if len(reason) > limit:
            raise InvalidDecisionError(
                f"a reason may be at most {limit} characters (this one has {len(reason)})"
            )

    async def decide(self, user: User, ref: str, action: Action, reason: str) -> DecisionResult:
        """Record a decision on a claimed item: audit event, strike and outbox row, one transaction.

        Every entry point (API and console) stores decisions through here, so the reason is
        bounded here. Publishing is the caller's next step (``OutboxRelay.flush``); ``published``
        is False here.
        """
        self.check_reason(reason)
        async with self._pool.acquire() as conn, conn.transaction():
            item = await self.locked_claim(conn, user, ref)
            item_id: int = item["id"]
            public_id = str(item["public_id"])
            if item["queue"] == APPEALS_QUEUE:
                raise InvalidDecisionError(
                    f"item {public_id} is an appeal: decide it as upheld or reversed "
                    f"(POST /api/items/{public_id}/appeal-outcome)"
                )
            weight = STRIKE_WEIGHTS[action]
            decision_id: str | None = None
            if action is Action.ESCALATE_TO_ADMIN:
                if item["queue"] == "admin":
                    raise InvalidDecisionError(f"item {public_id} is already in the admin queue")
                await conn.execute(
                    "UPDATE review_items SET queue = 'admin', status = 'open', claimed_by = NULL, "
                    "claimed_at = NULL, claim_expires_at = NULL WHERE id = $1",
                    item_id,
                )
            else:
                decision_id = str(uuid.uuid4())
                await conn.execute(
                    "UPDATE review_items SET status = 'resolved', resolution = $2, "
                    "resolved_by = $3, resolved_at = now(), claim_expires_at = NULL WHERE id = $1",
                    item_id,
                    action.value,
                    user.name,
                )
            details: dict[str, Any] = {"strike_weight": weight, "queue": item["queue"]}
            if decision_id is not None:
                details["decision_id"] = decision_id
            event_id, decided_at = await self.append_event(
                conn, item_id, user, action.value, reason, details
            )
            if weight:
                await conn.execute(
                    "INSERT INTO sender_strikes "
                    "(sender_id, group_id, review_item_id, action, weight, expires_at, tenant) "
                    "VALUES ($1, $2, $3, $4, $5, now() + make_interval(days => $6), $7)",
                    item["sender_id"],
                    item["group_id"],
                    item_id,
                    action.value,
                    weight,
                    self._settings.strike_decay_days,
                    item["tenant"],
                )
            if decision_id is not None:
                payload = {
                    "decision_id": decision_id,
                    "tenant": item["tenant"],
                    "review_item_id": item_id,
                    "action": action.value,
                    "reason": reason,
                    "moderator": user.name,
                    "decided_at": decided_at.isoformat(),
                    "message_id": item["message_id"],
                    "group_id": item["group_id"],
                    "sender_id": item["sender_id"],
                    "category": item["category"],
                    "auto_decision": item["auto_decision"],
                    "strike_weight": weight,
                    "source": {
                        "topic": item["source_topic"],
                        "partition": item["source_partition"],
                        "offset": item["source_offset"],
                    },
                }
                await conn.execute(
                    "INSERT INTO review_decision_outbox "
                    "(decision_id, review_event_id, message_key, payload, tenant) "
                    "VALUES ($1::uuid, $2, $3, $4::jsonb, $5)",
                    decision_id,
                    event_id,
                    item["group_id"],
                    encode_payload(payload),
                    item["tenant"],
                )
        return DecisionResult(
            item_id=public_id,
            action=action,
            decision_id=decision_id,
            event_id=event_id,
            decided_at=decided_at,
            published=False,
        )

    async def is_published(self, decision_id: str) -> bool:
        value = await self._pool.fetchval(
            "SELECT published_at IS NOT NULL FROM review_decision_outbox "
            "WHERE decision_id = $1::uuid",
            decision_id,
        )
        return bool(value)

    async def events(
        self,
        user: User,
        *,
        item_id: str | None = None,
        actor: str | None = None,
        limit: int = 100,
    ) -> list[AuditEvent]:
        """The audit trail of items in the user's queues, newest first (``item_id``: public)."""
        public_id = None if item_id is None else _public_id(item_id)
        rows = await self._pool.fetch(
            "SELECT e.id, r.public_id::text AS review_item_id, e.actor, e.action, "  # noqa: S608
            "e.reason, e.details, e.created_at "
            "FROM review_events e JOIN review_items r ON r.id = e.review_item_id "
            f"WHERE {_member(4, 5, 6)} "
            "AND ($1::uuid IS NULL OR r.public_id = $1) "
            "AND ($2::text IS NULL OR e.actor = $2) ORDER BY e.id DESC LIMIT $3",
            public_id,
            actor,
            limit,
            user.queues,
            user.category_list,
            user.tenant_list,
        )
        if public_id is not None and not rows:
            # Another tenant's item answers as an unknown one (an empty trail), and is recorded.
            item = await self._pool.fetchrow(
                "SELECT id, tenant FROM review_items WHERE public_id = $1", public_id
            )
            if item is not None and not user.sees_tenant(item["tenant"]):
                self._note_denial(user, "events", item["tenant"], item["id"])
        return [AuditEvent(**{**dict(row), "details": _jsonb(row["details"])}) for row in rows]

    async def context(self, user: User, ref: str) -> ItemContext:
        """The item with its verdict, the group's recent activity and the sender's record.

        Message text (the item's, the group's earlier escalations in the user's queues, and the
        conversation around the item: ``review.conversation``) is included only for the holder
        of the item's live claim or an admin; every such answer appends a ``view_text`` audit
        event (with the ids of the conversation's messages whose text it shows) before the
        history is read.
        """
        public_id = _public_id(ref)
        async with self._pool.acquire() as conn:
            item = await conn.fetchrow(
                f"SELECT r.*, CASE WHEN r.status = 'claimed' AND NOT {_LIVE_CLAIM} THEN 'open' "  # noqa: S608
                f"ELSE r.status END AS effective_status, {_LIVE_CLAIM} AS live "
                "FROM review_items r WHERE r.public_id = $1",
                public_id,
            )
            if item is None:
                raise ItemNotFoundError(f"review item {public_id} does not exist")
            await self.check_tenant(user, public_id, item, "view")
            if not user.works(item["queue"], item["category"]):
                raise _outside(str(public_id), item["queue"], item["category"])
            item_id: int = item["id"]
            tenant: str = item["tenant"]
            holds_claim = bool(item["live"]) and item["claimed_by"] == user.name
            text_visible = holds_claim or user.role is Role.ADMIN
            # An appeal's item is read as the appealed message: its verdict and conversation.
            appeal_row = None
            message: Any = item
            if item["queue"] == APPEALS_QUEUE:
                appeal_row = await conn.fetchrow(
                    SELECT_APPEAL + "WHERE a.review_item_id = $1", item_id
                )
                if appeal_row is not None:
                    message = {
                        **dict(item),
                        "source_topic": appeal_row["source_topic"],
                        "source_partition": appeal_row["source_partition"],
                        "source_offset": appeal_row["source_offset"],
                    }
            verdict = await conn.fetchrow(
                "SELECT decision, decided_by, category, reasons, rule_hits, scores, "
                "sentiment_label, intent_label, toxicity_label, model_name, model_version, "
                "batch_id::text AS batch_id, queue_ms, inference_ms, model_spans, created_at "
                "FROM verdicts "
                "WHERE source_topic = $1 AND source_partition = $2 AND source_offset = $3 "
                "AND sent_at = $4",
                message["source_topic"],
                message["source_partition"],
                message["source_offset"],
                message["sent_at"],
            )
            group_messages = await conn.fetch(
                "SELECT r.public_id::text AS id, r.sender_id, r.message_id, "  # noqa: S608
                "r.sent_at, "
                f"CASE WHEN $4::boolean AND {_member(5, 6, 7)} THEN r.message_text END "
                "AS message_text, r.category, r.status, r.resolution FROM review_items r "
                "WHERE r.group_id = $1 AND r.sent_at < $2 AND r.id <> $3 AND r.tenant = $8 "
                "ORDER BY r.sent_at DESC LIMIT 20",
                item["group_id"],
                item["sent_at"],
                item_id,
                text_visible,
                user.queues,
                user.category_list,
                user.tenant_list,
                tenant,
            )
            group_verdicts = await conn.fetch(
                "SELECT message_id, sender_id, sent_at, decision, decided_by, category "
                "FROM verdicts WHERE group_id = $1 AND sent_at < $2 "
                "AND sent_at > $2 - interval '7 days' AND tenant = $3 "
                "ORDER BY sent_at DESC LIMIT 20",
                item["group_id"],
                item["sent_at"],
                tenant,
            )
            sender_items = await conn.fetch(
                "SELECT public_id::text AS id, group_id, message_id, sent_at, category, status, "
                "resolution, resolved_by, resolved_at FROM review_items "
                "WHERE sender_id = $1 AND id <> $2 AND tenant = $3 ORDER BY sent_at DESC LIMIT 20",
                item["sender_id"],
                item_id,
                tenant,
            )
            counts = await conn.fetch(
                "SELECT decision, count(*)::integer AS n FROM verdicts WHERE sender_id = $1 "
                "AND sent_at > now() - interval '30 days' AND tenant = $2 GROUP BY decision",
                item["sender_id"],
                tenant,
            )
            strikes = await conn.fetch(
                "SELECT s.action, s.weight, s.group_id, r.public_id::text AS review_item_id, "
                "s.created_at, s.expires_at FROM sender_strikes s "
                "JOIN review_items r ON r.id = s.review_item_id "
                "WHERE s.sender_id = $1 AND s.expires_at > now() AND s.tenant = $2 "
                "ORDER BY s.created_at DESC",
                item["sender_id"],
                tenant,
            )
            conversation: list[ConversationMessage] = []
            if text_visible:
                settings = self._settings
                conversation = await conversation_window(
                    conn,
                    message,
                    user,
                    before=settings.context_before,
                    after=settings.context_after,
                    hours=settings.context_hours,
                )
                shown = sum(1 for m in group_messages if m["message_text"] is not None)
                around = [
                    m.message_id for m in conversation if m.text is not None and not m.is_item
                ]
                await self.append_event(
                    conn,
                    item_id,
                    user,
                    "view_text",
                    None,
                    {
                        "claim_held": holds_claim,
                        "context_texts": shown,
                        "conversation_texts": len(around),
                        "conversation_message_ids": around,
                        **({} if appeal_row is None else {"appeal_statement": True}),
                    },
                )
            evidence = None
            if appeal_row is not None:
                evidence = await self._appeal_evidence(conn, user, appeal_row, text_visible)
        item_dict = dict(item)
        item_dict["status"] = item_dict.pop("effective_status")
        del item_dict["live"]
        item_dict["id"] = str(item_dict.pop("public_id"))
        hint = None
        if not text_visible:
            item_dict["message_text"] = None
            hint = (
                f"claim this item to read its message text (POST /api/items/{public_id}/claim, "
                "or Claim in the console)"
            )
        verdict_detail = None
        if verdict is not None:
            verdict_detail = VerdictDetail(
                **{
                    **dict(verdict),
                    "reasons": list(verdict["reasons"]),
                    "rule_hits": _jsonb(verdict["rule_hits"]),
                    "scores": _jsonb(verdict["scores"]),
                    "model_spans": _jsonb(verdict["model_spans"]),
                }
            )
        return ItemContext(
            item=item_dict,
            text_visible=text_visible,
            text_hint=hint,
            verdict=verdict_detail,
            group_messages=[dict(r) for r in group_messages],
            group_verdicts=[dict(r) for r in group_verdicts],
            sender_items=[dict(r) for r in sender_items],
            sender_verdict_counts={r["decision"]: r["n"] for r in counts},
            sender_strikes=sum(r["weight"] for r in strikes),
            strikes=[Strike(**dict(r)) for r in strikes],
            events=await self.events(user, item_id=str(public_id)),
            conversation=conversation,
            appeal=evidence,
        )

    async def _appeal_evidence(
        self, conn: Conn, user: User, appeal: asyncpg.Record, text_visible: bool
    ) -> AppealEvidence:
        """The appeal behind an item and the decision it contests (the statement only with
        ``text_visible``; the appealed item's trail as far as the user's queues reach)."""
        original_reason = None
        original_decided_at = None
        if appeal["original_item_id"] is not None and appeal["original_decision_id"] is not None:
            decision = await conn.fetchrow(
                "SELECT reason, created_at FROM review_events WHERE review_item_id = $1 "
                "AND details ? 'decision_id' AND details ->> 'decision_id' = $2::text "
                "ORDER BY id DESC LIMIT 1",
                appeal["original_item_id"],
                str(appeal["original_decision_id"]),
            )
            if decision is not None:
                original_reason = decision["reason"]
                original_decided_at = decision["created_at"]
        original_public = appeal["original_public_id"]
        statement = appeal["statement"] if text_visible else None
        return AppealEvidence(
            appeal=appeal_view(appeal),
            statement=statement or None,
            original_reason=original_reason,
            original_decided_at=original_decided_at,
            original_item_id=original_public,
            original_events=(
                [] if original_public is None else await self.events(user, item_id=original_public)
            ),
        )
