"""The review HTTP app: the JSON API under ``/api`` and the console under ``/console``.

Every API route needs ``Authorization: Bearer <token>``; the OpenAPI document itself is served
only to signed-in callers at ``/api/openapi.json``. Errors are JSON ``{"error", "detail"}``.
Items are named by their opaque public id. Every route refuses bodies over
``review.max_body_bytes`` (413); token checks that fail are limited per client address (429).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

import asyncpg
from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from common.logs import get_logger
from common.publishing import RecordPublisher
from review.appeal_outcomes import AppealOutcomes
from review.appeal_reader import AppealReader, KafkaAppealDeadLetters, consume_appeals
from review.appeals import AppealDesk
from review.auth import authenticate_platform, authenticate_token
from review.bodylimit import BodyLimitMiddleware, BodyTooLargeError, handle_body_too_large
from review.decisions import KafkaDecisionPublisher, OutboxRelay
from review.errors import (
    AlreadyAppealedError,
    AppealError,
    ForbiddenQueueError,
    PublishFailedError,
    ReviewError,
)
from review.metrics import ReviewMetrics
from review.queue import ReviewQueue
from review.ratelimit import SignInLimiter, client_address
from review.schemas import (
    APPEALS_QUEUE,
    AppealDecideRequest,
    AppealDecisionResult,
    AppealFiled,
    AppealOutcome,
    AppealRequest,
    AppealView,
    AuditEvent,
    ClaimResult,
    DecideRequest,
    DecisionResult,
    ItemContext,
    QueueCount,
    QueueFilter,
    QueueItem,
    Role,
    User,
)
from review.settings import ReviewServiceSettings

__all__ = ["ReviewServices", "create_app"]

_log = get_logger(__name__)
_bearer = HTTPBearer(auto_error=False, description="An API token from `modstream review add-user`")


@dataclass(slots=True)
class ReviewServices:
    """What the routes use; built by the app's lifespan (or handed in by tests)."""

    pool: asyncpg.Pool[Any]
    queue: ReviewQueue
    relay: OutboxRelay
    settings: ReviewServiceSettings
    sign_in: SignInLimiter
    """Console sign-ins and failed API token checks, per client address."""
    metrics: ReviewMetrics
    appeals: AppealDesk
    appeal_outcomes: AppealOutcomes

    async def flush_outbox(self, decision_id: str, item_id: str) -> bool:
        """Flush the outbox now; whether ``decision_id`` made it to Kafka."""
        try:
            await self.relay.flush()
        except PublishFailedError as exc:
            _log.warning("decision_publish_failed", item_id=item_id, error=str(exc))
            return False
        return await self.queue.is_published(decision_id)

    async def decide_appeal(
        self, user: User, item_id: str, outcome: AppealOutcome, reason: str
    ) -> AppealDecisionResult:
        """Decide the appeal item ``item_id`` as ``user`` (``AppealOutcomes.decide``: the claim,
        the reason and the original decider are checked there), count it and publish the
        correction now. The API and the console both decide appeals through here."""
        result = await self.appeal_outcomes.decide(user, item_id, outcome, reason)
        category = (await self.appeals.get(result.appeal_id)).category or "none"
        self.metrics.appeals_decided_total.labels(category, result.outcome.value).inc()
        published = await self.flush_outbox(result.correction_id, result.item_id)
        return result.model_copy(update={"published": published})

    async def publish_pending(self, decision: DecisionResult) -> DecisionResult:
        """Flush the outbox now; report whether this decision made it to Kafka."""
        if decision.decision_id is None:
            return decision
        try:
            await self.relay.flush()
        except PublishFailedError as exc:
            _log.warning("decision_publish_failed", item_id=decision.item_id, error=str(exc))
            return decision
        published = await self.queue.is_published(decision.decision_id)
        return decision.model_copy(update={"published": published})


def services(request: Request) -> ReviewServices:
    found: ReviewServices = request.app.state.review
    return found


Services = Annotated[ReviewServices, Depends(services)]


async def _bearer_user(
    request: Request,
    svc: ReviewServices,
    credentials: HTTPAuthorizationCredentials | None,
    *,
    platform: bool,
) -> User:
    """The review user (or, with ``platform``, also the chat server) owning the bearer token;
    401 otherwise, and failed checks count against the client address."""
    user = None
    if credentials is not None and credentials.scheme.lower() == "bearer":
        address = client_address(request)
        # An address out of attempts is refused before its token is even looked at.
        svc.sign_in.check(address)
        async with svc.pool.acquire() as conn:
            user = await authenticate_token(conn, credentials.credentials)
            if user is None and platform:
                user = await authenticate_platform(conn, credentials.credentials)
        if user is None:
            svc.sign_in.count(address)
    if user is None:
        raise HTTPException(
            status_code=401,
            detail="a valid API token is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return user


async def current_user(
    request: Request,
    svc: Services,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    return await _bearer_user(request, svc, credentials, platform=False)


async def appeals_caller(
    request: Request,
    svc: Services,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    """A moderator, an admin or a chat server (``platform``)."""
    return await _bearer_user(request, svc, credentials, platform=True)


CurrentUser = Annotated[User, Depends(current_user)]
AppealsCaller = Annotated[User, Depends(appeals_caller)]


async def admin_user(user: CurrentUser) -> User:
    if user.role is not Role.ADMIN:
        raise HTTPException(status_code=403, detail="admins only")
    return user


AdminUser = Annotated[User, Depends(admin_user)]


class UserInfo(BaseModel):
    name: str
    role: Role


class Me(UserInfo):
    tenants: list[str] | None
    """The tenants whose items the caller sees (``None``: every tenant, an unbound admin)."""


class SenderStrikes(BaseModel):
    sender_id: str
    strikes: int


def _queue_filter(
    category: str | None = None,
    group_id: str | None = None,
    queue: str | None = None,
    min_age_s: Annotated[float | None, Query(ge=0)] = None,
    max_age_s: Annotated[float | None, Query(ge=0)] = None,
    include_claimed: bool = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> QueueFilter:
    return QueueFilter(
        category=category,
        group_id=group_id,
        queue=queue,
        min_age_s=min_age_s,
        max_age_s=max_age_s,
        include_claimed=include_claimed,
        limit=limit,
    )


Filter = Annotated[QueueFilter, Depends(_queue_filter)]


_SCOPED_USERS = """
SELECT name, role FROM review_users
WHERE disabled_at IS NULL
  AND ($1::text[] IS NULL
       OR (coalesce(tenants, ARRAY['default']::text[]) && $1::text[]
           AND NOT (role = 'admin' AND tenants IS NULL)))
ORDER BY name
"""


def _register_api(app: FastAPI) -> None:
    @app.get("/metrics", include_in_schema=False)
    async def metrics(svc: Services) -> Response:
        """Prometheus text exposition; the outbox and queue figures are read now."""
        svc.metrics.observe_backlog(await svc.relay.backlog())
        svc.metrics.observe_queues(await svc.queue.depth(), svc.settings.review.queue_targets_s)
        body, content_type = svc.metrics.render()
        return Response(body, media_type=content_type)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        """Alive: the process answers (a liveness probe)."""
        return Response("ok\n", media_type="text/plain")

    @app.get("/readyz", include_in_schema=False)
    async def readyz(svc: Services) -> Response:
        """Ready: PostgreSQL answers (a readiness probe); 503 otherwise."""
        try:
            async with asyncio.timeout(2.0):
                await svc.pool.fetchval("SELECT 1")
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return Response("postgres unavailable\n", status_code=503, media_type="text/plain")
        return Response("ready\n", media_type="text/plain")

    @app.get("/api/me", response_model=Me, tags=["auth"])
    async def me(user: CurrentUser) -> Me:
        """Who the token belongs to, and the tenants whose items it sees."""
        return Me(name=user.name, role=user.role, tenants=user.tenant_list)

    @app.get("/api/queue", response_model=list[QueueItem], tags=["queue"])
    async def list_queue(user: CurrentUser, svc: Services, flt: Filter) -> list[QueueItem]:
        """Open items in priority order (rank = priority + repeat offender + age boosts)."""
        return await svc.queue.list_items(user, flt)

    @app.get("/api/queue/counts", response_model=list[QueueCount], tags=["queue"])
    async def queue_counts(user: CurrentUser, svc: Services) -> list[QueueCount]:
        """Open and claimed items per queue and category."""
        return await svc.queue.counts(user)

    @app.post(
        "/api/queue/claim-next",
        response_model=ClaimResult,
        responses={204: {"description": "nothing to claim"}},
        tags=["queue"],
    )
    async def claim_next(user: CurrentUser, svc: Services, flt: Filter) -> Any:
        """Claim the best available item matching the filters."""
        claim = await svc.queue.claim_next(user, flt)
        if claim is None:
            return Response(status_code=204)
        return claim

    @app.get("/api/claims", response_model=list[QueueItem], tags=["queue"])
    async def my_claims(user: CurrentUser, svc: Services) -> list[QueueItem]:
        """Items the caller holds a live claim on."""
        return await svc.queue.my_claims(user)

    @app.get("/api/items/{item_id}", response_model=ItemContext, tags=["items"])
    async def item_context(item_id: str, user: CurrentUser, svc: Services) -> ItemContext:
        """The item, its verdict (scores, rule hits, model version), group and sender context.

        Message text only for the holder of the item's claim (or an admin); each view is audited.
        """
        return await svc.queue.context(user, item_id)

    @app.post("/api/items/{item_id}/claim", response_model=ClaimResult, tags=["items"])
    async def claim(item_id: str, user: CurrentUser, svc: Services) -> ClaimResult:
        """Claim one item exclusively until the claim expires (renews a claim you hold)."""
        return await svc.queue.claim(user, item_id)

    @app.post("/api/items/{item_id}/release", status_code=204, tags=["items"])
    async def release(item_id: str, user: CurrentUser, svc: Services) -> Response:
        """Return a claimed item to the queue."""
        await svc.queue.release(user, item_id)
        return Response(status_code=204)

    @app.post("/api/items/{item_id}/decide", response_model=DecisionResult, tags=["items"])
    async def decide(
        item_id: str, body: DecideRequest, user: CurrentUser, svc: Services
    ) -> DecisionResult:
        """Decide a claimed item; audited, strikes updated, published to moderation.decisions."""
        result = await svc.queue.decide(user, item_id, body.action, body.reason)
        _log.info(
            "review_decided", item_id=result.item_id, action=body.action.value, actor=user.name
        )
        return await svc.publish_pending(result)

    @app.post(
        "/api/appeals",
        response_model=AppealFiled,
        status_code=201,
        responses={200: {"model": AppealFiled, "description": "a replay: filed before"}},
        tags=["appeals"],
    )
    async def file_appeal(body: AppealRequest, caller: AppealsCaller, svc: Services) -> Any:
        """File an appeal against a verdict (``source``) or a moderator's decision
        (``decision_id``); chat servers only (a ``platform`` token). Filing the same
        ``appeal_id`` again answers the existing appeal with 200 and ``created`` false."""
        if caller.role is not Role.PLATFORM:
            raise HTTPException(status_code=403, detail="appeals are filed by the platform")
        try:
            filed = await svc.appeals.file(
                body, channel="api", filed_by=caller.name, tenants=caller.tenant_list
            )
        except AppealError as exc:
            svc.metrics.appeals_refused_total.labels("api", exc.code).inc()
            raise
        if not filed.created:
            return JSONResponse(filed.model_dump(mode="json"), status_code=200)
        svc.metrics.appeals_filed_total.labels("api").inc()
        return filed

    @app.get("/api/appeals/{appeal_id}", response_model=AppealView, tags=["appeals"])
    async def appeal(appeal_id: str, caller: AppealsCaller, svc: Services) -> AppealView:
        """An appeal and where it stands (the platform's, or one in the caller's queues)."""
        found = await svc.appeals.get(appeal_id, caller.tenant_list)
        if caller.role is not Role.PLATFORM and not caller.works(APPEALS_QUEUE, found.category):
            raise ForbiddenQueueError(f"appeal {found.appeal_id} is outside your queues")
        return found

    @app.post(
        "/api/items/{item_id}/appeal-outcome",
        response_model=AppealDecisionResult,
        tags=["appeals"],
    )
    async def decide_appeal(
        item_id: str, body: AppealDecideRequest, user: CurrentUser, svc: Services
    ) -> AppealDecisionResult:
        """Decide a claimed appeal item: upheld or reversed, with a reason (never by the
        moderator whose decision is appealed); audited, a reversal lifts the decision's strikes,
        the correction is published to moderation.decisions."""
        return await svc.decide_appeal(user, item_id, body.outcome, body.reason)

    @app.get("/api/events", response_model=list[AuditEvent], tags=["audit"])
    async def events(
        user: CurrentUser,
        svc: Services,
        item_id: str | None = None,
        actor: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[AuditEvent]:
        """The audit trail of actions on items in the caller's queues, newest first."""
        return await svc.queue.events(user, item_id=item_id, actor=actor, limit=limit)

    @app.get("/api/senders/{sender_id}/strikes", response_model=SenderStrikes, tags=["senders"])
    async def sender_strikes(sender_id: str, user: CurrentUser, svc: Services) -> SenderStrikes:
        """A sender's live strike total within the caller's tenants (what the rules see as
        metadata.sender_strikes)."""
        from common.strikes import active_strikes

        totals = await active_strikes(svc.pool, [sender_id], user.tenant_list)
        return SenderStrikes(sender_id=sender_id, strikes=totals[sender_id])

    @app.get("/api/users", response_model=list[UserInfo], tags=["admin"])
    async def users(user: AdminUser, svc: Services) -> list[UserInfo]:
        """Every enabled user (admins only; tokens are never shown). An admin bound to tenants
        sees the users of those tenants alone (an unbound user is the default tenant's, an
        unbound admin every tenant's, so only unbound admins see them)."""
        rows = await svc.pool.fetch(_SCOPED_USERS, user.tenant_list)
        return [UserInfo(name=r["name"], role=Role(r["role"])) for r in rows]

    @app.get("/api/openapi.json", include_in_schema=False)
    async def openapi(user: CurrentUser) -> JSONResponse:
        return JSONResponse(app.openapi())


async def _review_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ReviewError)
    if request.url.path.startswith("/console"):
        from review.console import render_error

        response = render_error(request, exc)
    else:
        body: dict[str, Any] = {"error": exc.code, "detail": str(exc), "retriable": exc.retriable}
        if isinstance(exc, AlreadyAppealedError):
            body["appeal_id"] = exc.existing_appeal_id
        response = JSONResponse(body, status_code=exc.status_code)
    if exc.retry_after_s is not None:
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


def create_app(
    settings: ReviewServiceSettings,
    *,
    pool: asyncpg.Pool[Any] | None = None,
    publisher: RecordPublisher | None = None,
    consume_appeals_topic: bool | None = None,
) -> FastAPI:
    """The ASGI app. Given a pool and publisher (tests), it uses them and closes neither.

    It reads ``kafka.appeal_topic`` when ``consume_appeals_topic`` says so; left out, when
    ``review.appeals_consumer`` is on and no pool was handed in (``modstream review serve``).
    """
    read_appeals = (
        settings.review.appeals_consumer and pool is None
        if consume_appeals_topic is None
        else consume_appeals_topic
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_pool = pool is None
        the_pool = pool or await asyncpg.create_pool(
            settings.postgres.dsn.get_secret_value(),
            min_size=settings.postgres.min_pool_size,
            max_size=settings.postgres.max_pool_size,
            command_timeout=settings.postgres.command_timeout_s,
        )
        kafka_publisher: KafkaDecisionPublisher | None = None
        if publisher is None:
            kafka_publisher = KafkaDecisionPublisher(settings.kafka)
            the_publisher: RecordPublisher = kafka_publisher
        else:
            the_publisher = publisher
        metrics = ReviewMetrics()
        relay = OutboxRelay(
            the_pool,
            the_publisher,
            settings.kafka.decision_topic,
            max_attempts=settings.review.publish_max_attempts,
            on_published=metrics.decisions_published_total.inc,
            on_refused=metrics.decision_refusals_total.inc,
            on_failed=metrics.decisions_failed_total.inc,
        )
        queue = ReviewQueue(the_pool, settings.review)
        desk = AppealDesk(the_pool, settings.review)
        app.state.review = ReviewServices(
            pool=the_pool,
            queue=queue,
            relay=relay,
            settings=settings,
            sign_in=SignInLimiter(settings.review.sign_in_attempts_per_minute),
            metrics=metrics,
            appeals=desk,
            appeal_outcomes=AppealOutcomes(the_pool, queue),
        )
        tasks = [asyncio.create_task(relay.run(settings.review.publish_retry_s))]
        dead_letters: KafkaAppealDeadLetters | None = None
        if read_appeals:
            dead_letters = KafkaAppealDeadLetters(settings.kafka, the_pool)
            reader = AppealReader(
                desk,
                dead_letters,
                max_bytes=settings.review.max_body_bytes,
                retry_s=settings.review.appeals_retry_s,
                on_filed=metrics.appeals_filed_total.labels("kafka").inc,
                on_refused=lambda code: metrics.appeals_refused_total.labels("kafka", code).inc(),
            )
            tasks.append(
                asyncio.create_task(
                    consume_appeals(
                        settings.kafka,
                        settings.review.appeals_group_id,
                        reader,
                        settings.review.appeals_retry_s,
                    )
                )
            )
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if dead_letters is not None:
                await dead_letters.stop()
            if kafka_publisher is not None:
                await kafka_publisher.stop()
            if own_pool:
                await the_pool.close()

    app = FastAPI(
        title="modstream review",
        version="1",
        description="Moderator queue, claims, decisions and audit for modstream escalations.",
        lifespan=lifespan,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.add_exception_handler(ReviewError, _review_error)
    app.add_exception_handler(BodyTooLargeError, handle_body_too_large)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.review.max_body_bytes)
    _register_api(app)
    from review.console import register_console

    register_console(app)
    return app
