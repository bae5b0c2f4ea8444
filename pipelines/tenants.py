"""Tenant ids: the communities one install moderates.

A message may name its community (``tenant``); one that does not belongs to the default tenant,
:data:`DEFAULT_TENANT`, which is also what every row written before tenants existed carries. A
tenant id is 1 to 64 characters of lower-case letters, digits, ``-`` and ``_``, starting with a
letter or digit: safe as a file name, a SQL value and a bounded metric label.
"""

from __future__ import annotations

import re

from pipelines.errors import PipelineError

__all__ = ["DEFAULT_TENANT", "TENANT_ID", "TenantIdError", "check_tenant_id", "is_default"]

TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
DEFAULT_TENANT = "default"
"""The tenant of a message that names none, and of every row from before tenants."""


class TenantIdError(PipelineError):
    """A tenant id, or a tenant rule file's name, that is not one."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"tenant {name!r}: {problem}")
        self.name = name
        self.problem = problem


def check_tenant_id(tenant: str) -> str:
    """``tenant`` if it is a valid tenant id; otherwise :class:`TenantIdError`."""
    if not TENANT_ID.fullmatch(tenant):
        raise TenantIdError(tenant, f"a tenant id must match {TENANT_ID.pattern}")
    return tenant


def is_default(tenant: str | None) -> bool:
    """Whether ``tenant`` is the default tenant (``None`` is taken as the default too)."""
    return tenant is None or tenant == DEFAULT_TENANT
