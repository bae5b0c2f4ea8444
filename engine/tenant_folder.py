"""The listing both tenant folders share (``rules.tenants_dir``, ``policy_file.tenants_dir``).

A folder holds one file per tenant, named after it. Names starting with ``.`` or ``_`` are not
tenants (a ConfigMap's own entries, layers that tenants share), nor are sub-folders or what
``skip`` names; a name that is not a tenant's file, and every file past ``max_tenants`` (by
name), is refused with the problem, for the watcher to report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.tenants import TenantIdError

__all__ = ["TenantListing", "list_tenant_files"]


@dataclass(frozen=True, slots=True)
class TenantListing:
    files: dict[str, Path] = field(default_factory=dict)
    """Tenant id -> its file."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    """(file name, problem) for each name refused."""


def _never(_name: str) -> bool:
    return False


def list_tenant_files(
    folder: Path,
    max_tenants: int,
    tenant_of: Callable[[str], str],
    limit_setting: str,
    skip: Callable[[str], bool] = _never,
) -> TenantListing:
    """The tenant files of ``folder`` (module docstring); ``OSError`` when it cannot be read.
    ``tenant_of`` maps a file name to its tenant or raises ``TenantIdError``; ``limit_setting``
    names ``max_tenants`` in the refusal."""
    entries = sorted(
        (e.name, e.is_dir())
        for e in os.scandir(folder)
        if not e.name.startswith((".", "_")) and not skip(e.name)
    )
    listing = TenantListing()
    for name, is_dir in entries:
        if is_dir:
            continue
        try:
            tenant = tenant_of(name)
        except TenantIdError as exc:
            listing.refused.append((name, str(exc)))
            continue
        if len(listing.files) == max_tenants:
            listing.refused.append((name, f"more than {limit_setting}={max_tenants} files"))
            continue
        listing.files[tenant] = folder / name
    return listing
