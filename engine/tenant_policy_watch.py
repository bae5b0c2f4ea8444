"""The tenant policy folder: one policy file per tenant, loaded at start and reloaded when it
changes.

Every ``interval_s`` the folder (``policy_file.tenants_dir``) is listed: ``<tenant id>.toml`` is
that tenant's policy file (``pipelines.policy_file``: ``[levels]`` and ``[thresholds]``), read
over the ``policy`` settings as the default tenant's file is, not over the default tenant's
file. Names starting with ``.`` (a Kubernetes ConfigMap's ``..data``) or ``_``, calibration
proposals (``<tenant id>.proposed.toml``) and folders are passed by; any other name is refused
(``pipelines.tenant_policies``: ``default.toml`` among them), and files past ``max_tenants`` (by
name) too, each logged once. A tenant's file is loaded again when its ``(mtime, size)`` changed
(``stat`` follows symlinks). A file that fails to load is refused for its tenant: the rejection
is logged with the problem (never the file's text) and counted
(``modstream_policy_reloads_total{result="rejected"}``), and the tenant keeps the thresholds in
use (the default tenant's, if its file never loaded). A removed file sends its tenant back to the
default tenant's thresholds.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

from common.logs import get_logger
from engine.policy_stage import PolicyStage
from engine.tenant_folder import list_tenant_files
from pipelines.policy import PolicyThresholds
from pipelines.policy_file import PolicyFileError, load_policy_file
from pipelines.tenant_policies import is_proposal, tenant_of_policy_file

__all__ = ["TenantPolicyWatcher"]

_log = get_logger(__name__)

_Stamp = tuple[int, int] | None
"""(mtime in ns, size), or ``None`` while the file cannot be stat-ed."""


@dataclass(frozen=True, slots=True)
class _Refused:
    error: PolicyFileError


class TenantPolicyWatcher:
    """Keeps ``stage``'s tenant thresholds in step with ``folder`` (module docstring)."""

    def __init__(
        self,
        folder: Path,
        interval_s: float,
        stage: PolicyStage,
        base: PolicyThresholds,
        *,
        max_tenants: int,
    ) -> None:
        self._folder = folder
        self._interval_s = interval_s
        self._stage = stage
        self._base = base
        self._max_tenants = max_tenants
        self._stamps: dict[str, _Stamp] = {}
        self._refused_names: set[str] = set()
        self.reloads = 0
        self.rejections = 0

    def load_all(self) -> int:
        """Load every tenant file now (at start, before any message); how many loaded."""
        changed, removed = self._changes()
        self._install(self._load(changed), removed, each=False)
        _log.info(
            "tenant_policies_loaded", tenants=len(self._stage.tenants), rejected=self.rejections
        )
        return len(self._stage.tenants)

    async def check(self) -> int:
        """Reload the tenants whose files changed; how many got new thresholds or went back to
        the default tenant's."""
        changed, removed = self._changes()
        if not changed and not removed:
            return 0
        results = await asyncio.to_thread(self._load, changed)
        return self._install(results, removed)

    async def run(self, done: asyncio.Event) -> None:
        """Poll until ``done`` is set."""
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._interval_s)
            if not done.is_set():
                await self.check()

    def _changes(self) -> tuple[dict[str, tuple[Path, _Stamp]], list[str]]:
        """The tenants whose file changed (with the file and its stamp) and those whose file
        is gone."""
        files = self._listing()
        changed: dict[str, tuple[Path, _Stamp]] = {}
        for tenant, path in files.items():
            stamp = _stamp(path)
            if tenant not in self._stamps or self._stamps[tenant] != stamp:
                changed[tenant] = (path, stamp)
        removed = [tenant for tenant in self._stamps if tenant not in files]
        return changed, removed

    def _listing(self) -> dict[str, Path]:
        """The tenant files of the folder, at most ``max_tenants``; other names refused once."""
        try:
            listing = list_tenant_files(
                self._folder,
                self._max_tenants,
                tenant_of_policy_file,
                "policy_file.max_tenants",
                skip=is_proposal,
            )
        except OSError as exc:
            _log.error(
                "tenant_policy_folder_unreadable", path=str(self._folder), error=exc.strerror
            )
            return {tenant: self._folder / f"{tenant}.toml" for tenant in self._stamps}
        for name, problem in listing.refused:
            self._refuse_name(name, problem)
        return listing.files

    def _refuse_name(self, name: str, problem: str) -> None:
        if name not in self._refused_names:
            self._refused_names.add(name)
            self.rejections += 1
            _log.error("tenant_policy_file_refused", path=str(self._folder / name), error=problem)

    def _load(
        self, changed: dict[str, tuple[Path, _Stamp]]
    ) -> dict[str, tuple[_Stamp, PolicyThresholds | _Refused]]:
        """Each changed tenant's thresholds, or why not (runs off the event loop)."""
        results: dict[str, tuple[_Stamp, PolicyThresholds | _Refused]] = {}
        for tenant, (path, stamp) in changed.items():
            try:
                results[tenant] = (stamp, load_policy_file(path, self._base))
            except PolicyFileError as exc:
                results[tenant] = (stamp, _Refused(exc))
        return results

    def _install(
        self,
        results: dict[str, tuple[_Stamp, PolicyThresholds | _Refused]],
        removed: list[str],
        *,
        each: bool = True,
    ) -> int:
        """Install what loaded, count and log what did not; ``each``: log every tenant
        installed (a reload), not only the refusals (the start)."""
        installed = 0
        for tenant, (stamp, result) in results.items():
            self._stamps[tenant] = stamp
            if isinstance(result, _Refused):
                self.rejections += 1
                self._stage.reject(result.error)
                _log.error("tenant_policy_reload_rejected", tenant=tenant, error=str(result.error))
                continue
            self._stage.install_tenant(tenant, result)
            self.reloads += 1
            installed += 1
            if each:
                _log.info("tenant_policy_reloaded", tenant=tenant)
        for tenant in removed:
            del self._stamps[tenant]
            self._stage.remove_tenant(tenant)
            _log.info("tenant_policy_removed", tenant=tenant)
        return installed + len(removed)


def _stamp(path: Path) -> _Stamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)
