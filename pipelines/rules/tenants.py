"""Tenant ids: the communities one install moderates, each with its own rule stack.

A tenant's rules are the file ``<tenant id>.toml`` in the tenant folder (``rules.tenants_dir``);
the file name is the tenant id, so it is checked like one: 1 to 64 characters of lower-case
letters, digits, ``-`` and ``_``, starting with a letter or digit. ``None`` is the default
tenant, whose rules are the default stack (``rules.path``, or the shipped set).
"""

from __future__ import annotations

import re

from pipelines.errors import PipelineError

__all__ = ["RULE_FILE_SUFFIX", "TENANT_ID", "TenantIdError", "check_tenant_id", "tenant_of_file"]

TENANT_ID = re.compile(r"[a-z0-9][a-z0-9_\-]{0,63}")
RULE_FILE_SUFFIX = ".toml"


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


def tenant_of_file(file_name: str) -> str:
    """The tenant whose rule file is named ``file_name`` (``acme.toml`` -> ``acme``)."""
    if not file_name.endswith(RULE_FILE_SUFFIX):
        raise TenantIdError(file_name, f"a tenant rule file is named <tenant id>{RULE_FILE_SUFFIX}")
    return check_tenant_id(file_name.removesuffix(RULE_FILE_SUFFIX))
