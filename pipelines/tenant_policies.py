"""Tenant policy files: ``<tenant id>.toml`` in the tenant policy folder
(``policy_file.tenants_dir``).

The file name is the tenant id, so it is checked like one (``pipelines.tenants``). The default
tenant has no file there: its policy is ``policy_file.path`` (or the ``policy`` settings), so a
file named ``default.toml`` is refused. A proposal ``modstream policy calibrate --tenant T``
writes beside the live files, ``<tenant id>.proposed.toml`` (and its report), is not a
tenant's policy: the
folder's watch passes it by (:func:`is_proposal`), as it does names starting with ``.`` or ``_``.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.tenants import DEFAULT_TENANT, TenantIdError, check_tenant_id

__all__ = [
    "POLICY_FILE_SUFFIX",
    "PROPOSAL_SUFFIX",
    "is_proposal",
    "proposal_path",
    "tenant_of_policy_file",
]

POLICY_FILE_SUFFIX = ".toml"
PROPOSAL_SUFFIX = ".proposed.toml"


def tenant_of_policy_file(file_name: str) -> str:
    """The tenant whose policy file is named ``file_name`` (``acme.toml`` -> ``acme``)."""
    if not file_name.endswith(POLICY_FILE_SUFFIX):
        raise TenantIdError(
            file_name, f"a tenant policy file is named <tenant id>{POLICY_FILE_SUFFIX}"
        )
    tenant = check_tenant_id(file_name.removesuffix(POLICY_FILE_SUFFIX))
    if tenant == DEFAULT_TENANT:
        raise TenantIdError(
            file_name, "the default tenant's policy is policy_file.path, not a file here"
        )
    return tenant


def is_proposal(file_name: str) -> bool:
    """Whether ``file_name`` is a calibration proposal or its report (``acme.proposed.toml``,
    ``acme.proposed.report.json``), not a policy: no tenant id holds a dot."""
    return PROPOSAL_SUFFIX.removesuffix(POLICY_FILE_SUFFIX) + "." in file_name


def proposal_path(folder: Path, tenant: str) -> Path:
    """Where ``modstream policy calibrate --tenant`` writes ``tenant``'s proposal by default."""
    return folder / f"{check_tenant_id(tenant)}{PROPOSAL_SUFFIX}"
