"""A hostile client against the real review service: each hole found by reading the code, closed.

Every test drives ``create_app`` over httpx's ASGI transport with a throw-away database, as the
other review tests do, and tries one abuse: reading text without a claim, reading other queues'
texts through an item's group, guessing sequential ids, oversized or over-many-field bodies, huge
decision reasons, guessing tokens, and plain-HTTP cookies on a public bind.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from review.api import create_app
from review.auth import create_user
from review.schemas import Role
from review.settings import ReviewServiceSettings
from tests.support import MemoryPublisher, temporary_database

pytestmark = pytest.mark.integration

SECRET = "the secret words of item one"
Serve = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture(scope="module")
async def db_settings() -> AsyncIterator[ReviewServiceSettings]:
    async with temporary_database(
        ReviewServiceSettings(), prefix="modstream_test_hostile"
    ) as settings:
        yield settings


@pytest.fixture(scope="module")
async def pool(db_settings: ReviewServiceSettings) -> AsyncIterator[asyncpg.Pool[Any]]:
    the_pool = await asyncpg.create_pool(
        db_settings.postgres.dsn.get_secret_value(), min_size=1, max_size=6
    )
    yield the_pool
    await the_pool.close()


@pytest.fixture(autouse=True)
async def _clean(pool: asyncpg.Pool[Any]) -> None:
    await pool.execute(
        "TRUNCATE review_decision_outbox, sender_strikes, review_events, review_items, "
        "review_sessions, review_users RESTART IDENTITY CASCADE"
    )


@pytest.fixture
def publisher() -> MemoryPublisher:
    return MemoryPublisher()


@pytest.fixture
def serve(
    db_settings: ReviewServiceSettings, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> Serve:
    """Start the app with ``review`` settings overridden; yield a client at ``address``."""

    @asynccontextmanager
    async def start(address: str = "127.0.0.1", **review: Any) -> AsyncIterator[httpx.AsyncClient]:
        settings = db_settings.model_copy(
            update={"review": db_settings.review.model_copy(update=review)}
        )
        app = create_app(settings, pool=pool, publisher=publisher)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app, client=(address, 40000)),
                base_url="http://review.test",
            ) as http,
        ):
            yield http

    return start


@pytest.fixture
async def client(serve: Serve) -> AsyncIterator[httpx.AsyncClient]:
    async with serve() as http:
        yield http


_offset = 0


async def seed(
    pool: asyncpg.Pool[Any],
    *,
    text: str = SECRET,
    queue: str = "moderator",
    category: str = "hate",
    group_id: str = "g1",
    age_s: float = 0.0,
) -> str:
    """One escalation; returns its public id."""
    global _offset
    _offset += 1
    public_id: str = await pool.fetchval(
        "INSERT INTO review_items (source_topic, source_partition, source_offset, sent_at, "
        "message_id, group_id, sender_id, message_text, category, priority, auto_decision, queue) "
        "VALUES ('chat.messages', 0, $1, $2, $3, $4, 's1', $5, $6, 0.5, 'flag', $7) "
        "RETURNING public_id::text",
        _offset,
        datetime.now(UTC) - timedelta(seconds=age_s + 1),
        f"m{_offset}",
        group_id,
        text,
        category,
        queue,
    )
    return public_id


async def _token(
    pool: asyncpg.Pool[Any],
    name: str,
    role: Role = Role.MODERATOR,
    categories: list[str] | None = None,
) -> dict[str, str]:
    async with pool.acquire() as conn:
        token = await create_user(conn, name, role, categories)
    return {"Authorization": f"Bearer {token}"}


async def _sign_in(client: httpx.AsyncClient, pool: asyncpg.Pool[Any], name: str) -> str:
    """Sign ``client`` in to the console; returns a CSRF token of the session."""
    async with pool.acquire() as conn:
        token = await create_user(conn, name, Role.MODERATOR)
    response = await client.post("/console/login", data={"token": token})
    assert response.status_code == 303
    page = await client.get("/console/queue")
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match is not None
    return match.group(1)


async def _views(pool: asyncpg.Pool[Any], actor: str | None = None) -> int:
    count: int = await pool.fetchval(
        "SELECT count(*) FROM review_events WHERE action = 'view_text' "
        "AND ($1::text IS NULL OR actor = $1)",
        actor,
    )
    return count


async def test_item_view_without_a_claim_shows_no_text(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Unclaimed, the API and console item views give metadata and how to claim, never text."""
    item_id = await seed(pool)
    headers = await _token(pool, "peek")
    response = await client.get(f"/api/items/{item_id}", headers=headers)
    assert response.status_code == 200
    assert SECRET not in response.text
    body = response.json()
    assert body["text_visible"] is False
    assert body["item"]["message_text"] is None
    assert f"/api/items/{item_id}/claim" in body["text_hint"]
    assert body["item"]["category"] == "hate"

    await _sign_in(client, pool, "peek2")
    page = await client.get(f"/console/items/{item_id}")
    assert page.status_code == 200
    assert SECRET not in page.text
    assert 'id="text-hidden"' in page.text
    assert 'id="claim"' in page.text
    assert await _views(pool) == 0


async def test_someone_elses_claim_does_not_open_the_text(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """While another moderator holds the claim, a second moderator still sees no text."""
    item_id = await seed(pool)
    holder = await _token(pool, "holder")
    other = await _token(pool, "other")
    assert (await client.post(f"/api/items/{item_id}/claim", headers=holder)).status_code == 200
    response = await client.get(f"/api/items/{item_id}", headers=other)
    assert SECRET not in response.text
    assert response.json()["text_visible"] is False
    assert await _views(pool) == 0


async def test_every_text_view_is_audited(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Each showing of the text (API or console, claim holder or admin) appends view_text."""
    item_id = await seed(pool)
    mod = await _token(pool, "reader")
    assert (await client.post(f"/api/items/{item_id}/claim", headers=mod)).status_code == 200
    for expected in (1, 2):
        shown = (await client.get(f"/api/items/{item_id}", headers=mod)).json()
        assert shown["item"]["message_text"] == SECRET
        assert await _views(pool, "reader") == expected

    admin = await _token(pool, "boss", Role.ADMIN)
    seen = (await client.get(f"/api/items/{item_id}", headers=admin)).json()
    assert seen["item"]["message_text"] == SECRET
    assert await _views(pool, "boss") == 1
    details = await pool.fetchval(
        "SELECT details::text FROM review_events WHERE action = 'view_text' AND actor = 'boss'"
    )
    assert '"claim_held": false' in details

    csrf = await _sign_in(client, pool, "console-reader")
    claimed = await client.post(f"/console/items/{item_id}/claim", data={"csrf": csrf})
    assert claimed.status_code == 409  # "reader" still holds it
    await client.post(f"/api/items/{item_id}/release", headers=mod)
    claimed = await client.post(f"/console/items/{item_id}/claim", data={"csrf": csrf})
    assert claimed.headers["location"] == f"/console/items/{item_id}"
    page = await client.get(claimed.headers["location"])
    assert SECRET in page.text
    assert await _views(pool, "console-reader") == 1


async def test_group_context_shows_only_texts_of_the_viewers_queues(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Earlier group messages escalated to admins or in other categories keep their text hidden."""
    admin_only = await seed(pool, text="admin-only words", queue="admin", age_s=30)
    spam = await seed(pool, text="spam words", category="spam", age_s=20)
    visible = await seed(pool, text="moderator words", age_s=10)
    item_id = await seed(pool, text="the item itself")
    hate_mod = await _token(pool, "hate-mod", categories=["hate"])
    await client.post(f"/api/items/{item_id}/claim", headers=hate_mod)
    ctx = await client.get(f"/api/items/{item_id}", headers=hate_mod)
    texts = {m["id"]: m["message_text"] for m in ctx.json()["group_messages"]}
    assert texts == {visible: "moderator words", spam: None, admin_only: None}
    assert "admin-only words" not in ctx.text
    assert "spam words" not in ctx.text
    details = await pool.fetchval(
        "SELECT details::text FROM review_events WHERE action = 'view_text'"
    )
    assert '"context_texts": 1' in details

    admin = await _token(pool, "root", Role.ADMIN)
    admin_ctx = (await client.get(f"/api/items/{item_id}", headers=admin)).json()
    assert {m["message_text"] for m in admin_ctx["group_messages"]} == {
        "admin-only words",
        "spam words",
        "moderator words",
    }


async def test_category_membership_limits_every_route(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """A moderator working only spam neither lists, counts, views, claims nor audits hate items."""
    hate = await seed(pool, category="hate")
    spam = await seed(pool, category="spam")
    spammer = await _token(pool, "spam-only", categories=["spam"])
    listing = (await client.get("/api/queue", headers=spammer)).json()
    assert [i["id"] for i in listing] == [spam]
    counts = (await client.get("/api/queue/counts", headers=spammer)).json()
    assert [(c["category"], c["open"]) for c in counts] == [("spam", 1)]
    assert (await client.get(f"/api/items/{hate}", headers=spammer)).status_code == 403
    assert (await client.post(f"/api/items/{hate}/claim", headers=spammer)).status_code == 403
    claimed = await client.post("/api/queue/claim-next", headers=spammer)
    assert claimed.json()["item_id"] == spam
    assert (await client.post("/api/queue/claim-next", headers=spammer)).status_code == 204

    everyone = await _token(pool, "all-cats")
    await client.post(f"/api/items/{hate}/claim", headers=everyone)
    assert (await client.get(f"/api/events?item_id={hate}", headers=spammer)).json() == []
    assert len((await client.get(f"/api/events?item_id={hate}", headers=everyone)).json()) == 1


async def test_sequential_ids_are_not_accepted_in_urls(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Items are named by a random public id; the row number answers 404 on every item route."""
    public_ids = [await seed(pool) for _ in range(3)]
    headers = await _token(pool, "guesser")
    listing = (await client.get("/api/queue", headers=headers)).json()
    assert sorted(i["id"] for i in listing) == sorted(public_ids)
    assert not any(i["id"].isdigit() for i in listing)
    internal = await pool.fetchval("SELECT min(id) FROM review_items")
    for guess in (str(internal), "1", "2", "0", "-1", "x" * 300):
        assert (await client.get(f"/api/items/{guess}", headers=headers)).status_code == 404
        assert (await client.post(f"/api/items/{guess}/claim", headers=headers)).status_code == 404
        decided = await client.post(
            f"/api/items/{guess}/decide", headers=headers, json={"action": "ban", "reason": "r"}
        )
        assert decided.status_code == 404
        assert decided.json()["error"] == "item_not_found"
    await _sign_in(client, pool, "console-guesser")
    assert (await client.get(f"/console/items/{internal}")).status_code == 404
    assert await pool.fetchval("SELECT count(*) FROM review_events") == 0


async def _chunks(count: int, size: int, pulled: list[int]) -> AsyncIterator[bytes]:
    for _ in range(count):
        pulled.append(size)
        yield b"a" * size


async def test_oversized_bodies_are_refused_with_413(serve: Serve, pool: asyncpg.Pool[Any]) -> None:
    """Declared or chunked, a body over review.max_body_bytes gets 413 without being read whole."""
    async with serve(max_body_bytes=4096) as client:
        declared = await client.post(
            "/console/login",
            content=b"token=" + b"a" * 1_000_000,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert declared.status_code == 413
        assert declared.json()["error"] == "body_too_large"

        pulled: list[int] = []
        chunked = await client.post(
            "/console/login",
            content=_chunks(1000, 1024, pulled),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert chunked.status_code == 413
        assert sum(pulled) <= 4096 + 1024

        item_id = await seed(pool)
        headers = await _token(pool, "big")
        pulled.clear()
        decided = await client.post(
            f"/api/items/{item_id}/decide",
            content=_chunks(1000, 1024, pulled),
            headers={**headers, "Content-Type": "application/json"},
        )
        assert decided.status_code == 413
        assert sum(pulled) <= 4096 + 1024
        small = await client.post("/console/login", data={"token": "msr_wrong"})
        assert small.status_code == 401


async def test_forms_with_too_many_fields_answer_400(
    client: httpx.AsyncClient, pool: asyncpg.Pool[Any]
) -> None:
    """Sign-in and signed-in forms with more than 20 fields are a 400, not a server error."""
    fields = {f"f{i}": "x" for i in range(25)}
    response = await client.post("/console/login", data={"token": "msr_x", **fields})
    assert response.status_code == 400
    assert "at most 20 fields" in response.text
    csrf = await _sign_in(client, pool, "fields")
    claim_next = await client.post("/console/claim-next", data={"csrf": csrf, **fields})
    assert claim_next.status_code == 400


async def test_decision_reasons_are_bounded_on_every_entry_point(
    serve: Serve, pool: asyncpg.Pool[Any], publisher: MemoryPublisher
) -> None:
    """A reason over review.max_reason_chars is refused by the API (422) and console (422)."""
    async with serve(max_reason_chars=1000) as client:
        item_id = await seed(pool)
        headers = await _token(pool, "verbose")
        await client.post(f"/api/items/{item_id}/claim", headers=headers)
        long = await client.post(
            f"/api/items/{item_id}/decide",
            headers=headers,
            json={"action": "ban", "reason": "r" * 1001},
        )
        assert long.status_code == 422
        assert long.json()["error"] == "invalid_decision"
        assert "at most 1000 characters" in long.json()["detail"]

        csrf = await _sign_in(client, pool, "console-verbose")
        other = await seed(pool)
        await client.post(f"/console/items/{other}/claim", data={"csrf": csrf})
        page = await client.post(
            f"/console/items/{other}/decide",
            data={"csrf": csrf, "action": "ban", "reason": "r" * 1001},
        )
        assert page.status_code == 422
        assert "at most 1000 characters" in page.text
        assert publisher.records == []
        assert await pool.fetchval("SELECT count(*) FROM review_decision_outbox") == 0

        fits = await client.post(
            f"/api/items/{item_id}/decide",
            headers=headers,
            json={"action": "ban", "reason": "r" * 1000},
        )
        assert fits.status_code == 200
        assert len(publisher.records) == 1


async def test_console_sign_in_is_rate_limited_per_address(
    serve: Serve, pool: asyncpg.Pool[Any]
) -> None:
    """Ten sign-ins a minute per address; the eleventh, even with a good token, gets 429."""
    async with pool.acquire() as conn:
        good = await create_user(conn, "victim", Role.MODERATOR)
    async with serve(address="203.0.113.7") as attacker:
        for _ in range(10):
            guess = await attacker.post("/console/login", data={"token": "msr_guess"})
            assert guess.status_code == 401
        refused = await attacker.post("/console/login", data={"token": good})
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        assert "set-cookie" not in refused.headers
    async with serve(address="198.51.100.2") as neighbour:
        assert (await neighbour.post("/console/login", data={"token": good})).status_code == 303


async def test_failed_api_tokens_are_rate_limited_per_address(
    serve: Serve, pool: asyncpg.Pool[Any]
) -> None:
    """After ten bad tokens an address gets 429 for any token; good tokens do not count."""
    good = await _token(pool, "worker")
    async with serve(address="203.0.113.8") as client:
        for _ in range(3):
            assert (await client.get("/api/me", headers=good)).status_code == 200
        bad = {"Authorization": "Bearer msr_guess"}
        for _ in range(10):
            assert (await client.get("/api/me", headers=bad)).status_code == 401
        refused = await client.get("/api/me", headers=good)
        assert refused.status_code == 429
        assert refused.json()["error"] == "too_many_sign_in_attempts"
        assert 1 <= int(refused.headers["retry-after"]) <= 60


async def test_cookie_is_secure_when_not_bound_to_loopback(
    serve: Serve, pool: asyncpg.Pool[Any]
) -> None:
    """Bound to 0.0.0.0 the session cookie is Secure by default; on loopback it is not."""
    async with pool.acquire() as conn:
        token = await create_user(conn, "cookie", Role.MODERATOR)
    async with serve(host="0.0.0.0") as public:  # noqa: S104 - the bind under test
        signed_in = await public.post("/console/login", data={"token": token})
        assert signed_in.status_code == 303
        assert "secure" in signed_in.headers["set-cookie"].lower()
        # httpx keeps Secure cookies for https only: hand the session over by header.
        session = signed_in.headers["set-cookie"].split(";")[0]
        page = await public.get("/console/queue", headers={"Cookie": session})
        match = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert match is not None
        out = await public.post(
            "/console/logout", data={"csrf": match.group(1)}, headers={"Cookie": session}
        )
        assert out.headers["location"] == "/console/login"
        assert "secure" in out.headers["set-cookie"].lower()
    async with serve(host="127.0.0.1") as local:
        signed_in = await local.post("/console/login", data={"token": token})
        assert "secure" not in signed_in.headers["set-cookie"].lower()
