"""Tenant rule files: ``<tenant id>.toml`` in the tenant folder (``rules.tenants_dir``).

The file name is the tenant id, so it is checked like one (``pipelines.tenants``). The default
tenant has no file there: its rules are the default stack (``rules.path``, or the shipped set),
so a file named ``default.toml`` is refused.
"""

from __future__ import annotations

from pipelines.tenants import DEFAULT_TENANT, TENANT_ID, TenantIdError, check_tenant_id

__all__ = ["RULE_FILE_SUFFIX", "TENANT_ID", "TenantIdError", "check_tenant_id", "tenant_of_file"]

RULE_FILE_SUFFIX = ".toml"


def tenant_of_file(file_name: str) -> str:
    """The tenant whose rule file is named ``file_name`` (``acme.toml`` -> ``acme``)."""
    if not file_name.endswith(RULE_FILE_SUFFIX):
        raise TenantIdError(file_name, f"a tenant rule file is named <tenant id>{RULE_FILE_SUFFIX}")
    tenant = check_tenant_id(file_name.removesuffix(RULE_FILE_SUFFIX))
    if tenant == DEFAULT_TENANT:
        raise TenantIdError(file_name, "the default tenant's rules are rules.path, not a file here")
    return tenant
