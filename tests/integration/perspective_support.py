"""Helpers for the tests of ``comments:analyze``: settings with a free port, rows to count."""

from __future__ import annotations

from typing import Any

import asyncpg

from online.settings import OnlineSettings
from tests.integration.online_support import online_settings_for

__all__ = ["count_rows", "perspective_settings"]


def perspective_settings(
    database: str, topics: dict[str, str], **perspective: Any
) -> OnlineSettings:
    """The online service's test settings with ``comments:analyze`` on a free port."""
    base = online_settings_for(database, topics)
    section = base.perspective.model_copy(update={"port": 0, **perspective})
    return base.model_copy(update={"perspective": section})


async def count_rows(dsn: str) -> dict[str, int]:
    """How many online verdicts, claims, review items and pending texts are stored."""
    conn = await asyncpg.connect(dsn)
    try:
        return {
            table: int(await conn.fetchval(f"SELECT count(*) FROM {table}{where}"))  # noqa: S608
            for table, where in (
                ("verdicts", " WHERE source_topic = 'online'"),
                ("online_messages", ""),
                ("review_items", " WHERE source_topic = 'online'"),
                ("pending_texts", " WHERE source_topic = 'online'"),
            )
        }
    finally:
        await conn.close()
