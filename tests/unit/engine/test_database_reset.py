"""engine.stores.database: the pool's reset on checkout, default or light (online service)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from common.settings import PostgresSettings
from engine.stores import database as database_module
from engine.stores.database import Database, keep_session


class PoolArgs:
    def __init__(self) -> None:
        self.kwargs: dict[str, Any] = {}

    async def __call__(self, dsn: str, **kwargs: Any) -> object:
        self.kwargs = kwargs
        return object()


@pytest.mark.parametrize(("light", "expected"), [(False, None), (True, keep_session)])
async def test_the_reset_query_is_skipped_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, light: bool, expected: object
) -> None:
    created = PoolArgs()
    monkeypatch.setattr(database_module.asyncpg, "create_pool", created)
    settings = PostgresSettings(dsn=SecretStr("postgresql://u@127.0.0.1:1/d"))
    await Database(settings, light_reset=light).start()
    assert created.kwargs["reset"] is expected


async def test_the_light_reset_sends_nothing() -> None:
    class NoConnection:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the reset used the connection: {name}")

    await keep_session(NoConnection())  # type: ignore[arg-type]
