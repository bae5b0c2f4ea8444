"""SQL helpers the integration tests share: rows on a connection of their own, rows read as the
analyst role, and the SQL block of a section of docs/analysts.md (so the documented queries are
the tested ones)."""

from __future__ import annotations

import re
from typing import Any

import asyncpg

from common.settings import project_root

__all__ = ["documented_query", "fetch_as_analyst", "fetch_rows"]


async def fetch_rows(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def fetch_as_analyst(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    """``sql`` run as ``modstream_analyst`` (what the analysts' login may read)."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute("SET LOCAL ROLE modstream_analyst")
            return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def documented_query(heading: str) -> str:
    """The one SQL block of the section ``## heading`` of docs/analysts.md."""
    doc = (project_root() / "docs" / "analysts.md").read_text(encoding="utf-8")
    section = doc.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    [query] = re.findall(r"```sql\n(.*?)```", section, flags=re.DOTALL)
    return str(query)
