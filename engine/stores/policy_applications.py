"""The audit of policy changes: who applied which proposal, when (``policy_applications``).

``modstream policy apply`` records each application through the owner's function
``modstream_record_policy_application`` (migration 0091), which accepts only the API token of an
enabled admin (its SHA-256: the token itself never reaches the database) and returns the admin's
name. The record and the caller's own step (writing the live policy file) share one transaction:
if the step fails nothing is recorded, and if the record is refused the step never runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import orjson

from engine.stores.database import STORE_DRIVER_ERRORS, Database, StoreError, store_failure

__all__ = ["Applied", "NotAnAdmin", "PolicyApplication", "PolicyApplicationStore"]

_RECORD = """
SELECT applied_by, applied_at
FROM modstream_record_policy_application($1, $2, $3, $4, $5::jsonb, $6::jsonb)
"""


class NotAnAdmin(StoreError):
    """The token given is not the API token of an enabled admin: nothing was applied."""


@dataclass(frozen=True, slots=True)
class PolicyApplication:
    """What to record: the proposal's name and SHA-256, where it goes live, and the thresholds
    it gives against those in use before."""

    proposal_name: str
    proposal_sha256: str
    target: str
    thresholds: Mapping[str, float]
    previous: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Applied:
    """Who applied it and when, as recorded."""

    applied_by: str
    applied_at: datetime


class PolicyApplicationStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def record(
        self,
        token_sha256: str,
        application: PolicyApplication,
        then: Callable[[Applied], None],
    ) -> Applied:
        """Record ``application`` for the admin whose token hashes to ``token_sha256``, run
        ``then`` with the record inside the same transaction, and commit (module docstring)."""
        pool = self._database.pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    _RECORD,
                    token_sha256,
                    application.proposal_name,
                    application.proposal_sha256,
                    application.target,
                    orjson.dumps(dict(application.thresholds)).decode(),
                    orjson.dumps(dict(application.previous)).decode(),
                )
                if row is None:  # the function returns its row or raises
                    raise StoreError("policy application not recorded")
                applied = Applied(row["applied_by"], row["applied_at"])
                then(applied)
        except asyncpg.InsufficientPrivilegeError as exc:
            raise NotAnAdmin("not the API token of an enabled admin") from exc
        except STORE_DRIVER_ERRORS as exc:
            raise store_failure(exc, "policy application record") from exc
        return applied
