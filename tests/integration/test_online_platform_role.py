"""Platform tokens (chat servers) open nothing in the review service, and are listed as such."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from review.api import create_app
from review.auth import create_user
from review.schemas import Role
from review.settings import ReviewServiceSettings
from tests.support import MemoryPublisher, temporary_database

pytestmark = pytest.mark.integration


async def test_a_platform_token_is_refused_by_the_review_api_and_listed_by_admins() -> None:
    """/api/me answers 401 to a platform token; an admin's user list shows the platform user."""
    async with temporary_database(ReviewServiceSettings(), prefix="modstream_test_platform") as s:
        pool = await asyncpg.create_pool(s.postgres.dsn.get_secret_value(), min_size=1)
        try:
            async with pool.acquire() as conn:
                platform = await create_user(conn, "chat-server", Role.PLATFORM)
                admin = await create_user(conn, "boss", Role.ADMIN)
            app = create_app(s, pool=pool, publisher=MemoryPublisher())
            async with (
                app.router.lifespan_context(app),
                httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app), base_url="http://review.test"
                ) as client,
            ):
                refused = await client.get(
                    "/api/me", headers={"Authorization": f"Bearer {platform}"}
                )
                users = await client.get("/api/users", headers={"Authorization": f"Bearer {admin}"})
        finally:
            await pool.close()
    assert refused.status_code == 401
    assert users.status_code == 200
    assert {"name": "chat-server", "role": "platform"} in users.json()
