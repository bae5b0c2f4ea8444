"""The tenant folder: one rule file per tenant, loaded at start and reloaded when it changes.

Every ``interval_s`` the folder (``rules.tenants_dir``) is listed: ``<tenant id>.toml`` is that
tenant's rule stack (``pipelines.rules.layers``); names starting with ``_`` are layers tenants
share (``extends = "_gaming.toml"``), not tenants; names starting with ``.`` (a Kubernetes
ConfigMap's ``..data``) and folders are skipped; any other name is refused
(``pipelines.rules.tenants.TenantIdError``), and files past ``max_tenants`` (by name) too. A
tenant is loaded again when a file of its stack changed (its ``(mtime, size)``, following
symlinks): the files are read and the engine built off the event loop, and the engine is the
shared one of an equal stack when there is one (``pipelines.rules.shared_engines``). A file that
fails to load, or would need an engine past ``max_stacks``, is refused per tenant: the
rejection is logged with the problem and counted, and that tenant keeps the rules in use (the
default stack's, if it never loaded). A removed file sends its tenant back to the default stack.
Each engine built is logged with the seconds and the memory it took.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

from common.logs import get_logger
from engine.rule_stage import RuleStage
from engine.tenant_folder import list_tenant_files
from pipelines.rules import RuleLoadError
from pipelines.rules.layers import RuleStack, load_rule_stack, stack_files
from pipelines.rules.shared_engines import BuiltEngine, EngineLimitError, EngineShelf
from pipelines.rules.tenants import tenant_of_file

__all__ = ["TenantRulesWatcher"]

_log = get_logger(__name__)

_Stamp = tuple[tuple[str, int, int] | tuple[str], ...]
"""Each file of a tenant's stack: (path, mtime in ns, size), or (path,) while it is missing."""


@dataclass(frozen=True, slots=True)
class _Loaded:
    stack: RuleStack
    built: BuiltEngine
    new: bool


@dataclass(frozen=True, slots=True)
class _Refused:
    error: Exception
    files: tuple[Path, ...]


class TenantRulesWatcher:
    """Keeps ``stage``'s tenant engines in step with ``folder`` (module docstring)."""

    def __init__(
        self,
        folder: Path,
        interval_s: float,
        stage: RuleStage,
        shelf: EngineShelf,
        *,
        max_tenants: int,
    ) -> None:
        self._folder = folder
        self._interval_s = interval_s
        self._stage = stage
        self._shelf = shelf
        self._max_tenants = max_tenants
        self._stamps: dict[str, _Stamp] = {}
        self._files: dict[str, tuple[Path, ...]] = {}
        self._refused_names: set[str] = set()
        self.reloads = 0
        self.rejections = 0

    def load_all(self) -> int:
        """Load every tenant file now (at start, before any message); how many loaded. One
        line sums it up (each tenant's refusal and each engine built are logged on their own)."""
        started = time.perf_counter()
        changed, removed = self._changes()
        self._install(self._load(changed), removed, each=False)
        _log.info(
            "tenant_rules_loaded",
            tenants=len(self._stage.tenants),
            engines=len(self._stage.engines()),
            rejected=self.rejections,
            seconds=round(time.perf_counter() - started, 3),
        )
        return len(self._stage.tenants)

    async def check(self) -> int:
        """Reload the tenants whose files changed; how many got new rules or went back to the
        default."""
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

    def _changes(self) -> tuple[dict[str, Path], list[str]]:
        """The tenants whose stack changed (with their file) and those whose file is gone."""
        files = self._listing()
        stamps: dict[Path, tuple[str, int, int] | tuple[str]] = {}
        changed = {
            tenant: path
            for tenant, path in files.items()
            if self._stamps.get(tenant) != _stamp_of(self._files.get(tenant, (path,)), stamps)
        }
        removed = [tenant for tenant in self._stamps if tenant not in files]
        return changed, removed

    def _listing(self) -> dict[str, Path]:
        """The tenant files of the folder, at most ``max_tenants``; other names refused once."""
        try:
            listing = list_tenant_files(
                self._folder, self._max_tenants, tenant_of_file, "rules.max_tenants"
            )
        except OSError as exc:
            _log.error("tenant_rules_folder_unreadable", path=str(self._folder), error=exc.strerror)
            return {tenant: self._folder / f"{tenant}.toml" for tenant in self._stamps}
        for name, problem in listing.refused:
            self._refuse_name(name, problem)
        return listing.files

    def _refuse_name(self, name: str, problem: str) -> None:
        if name not in self._refused_names:
            self._refused_names.add(name)
            self.rejections += 1
            _log.error("tenant_rules_file_refused", path=str(self._folder / name), error=problem)

    def _load(self, changed: dict[str, Path]) -> dict[str, _Loaded | _Refused]:
        """Each changed tenant's stack and engine, or why not (runs off the event loop)."""
        results: dict[str, _Loaded | _Refused] = {}
        for tenant, path in changed.items():
            try:
                stack = load_rule_stack(path)
                built, new = self._shelf.engine_for(stack)
            except (RuleLoadError, EngineLimitError) as exc:
                results[tenant] = _Refused(exc, stack_files(path))
            else:
                results[tenant] = _Loaded(stack, built, new)
        return results

    def _install(
        self, results: dict[str, _Loaded | _Refused], removed: list[str], *, each: bool = True
    ) -> int:
        """Install what loaded, count and log what did not; ``each``: log every tenant
        installed (a reload), not only the refusals and the engines built (the start)."""
        stamps: dict[Path, tuple[str, int, int] | tuple[str]] = {}
        for tenant, result in results.items():
            files = result.files if isinstance(result, _Refused) else result.stack.paths
            self._files[tenant] = files
            self._stamps[tenant] = _stamp_of(files, stamps)
            if isinstance(result, _Refused):
                self.rejections += 1
                self._stage.reject(result.error)
                _log.error("tenant_rules_reload_rejected", tenant=tenant, error=str(result.error))
                continue
            built = result.built
            if result.new:
                _log.info(
                    "rule_engine_built",
                    layers=built.stack,
                    key=built.key,
                    rules=len(built.engine.ruleset.enabled),
                    build_s=round(built.build_s, 3),
                    rss_mb=round(built.rss_mb, 1),
                )
            self._stage.install_tenant(tenant, built.engine)
            self.reloads += 1
            if not each:
                continue
            _log.info(
                "tenant_rules_reloaded",
                tenant=tenant,
                layers=" > ".join(result.stack.names),
                rules=len(built.engine.ruleset.enabled),
                engine=built.key or built.stack,
            )
        for tenant in removed:
            del self._stamps[tenant]
            self._files.pop(tenant, None)
            self._stage.remove_tenant(tenant)
            _log.info("tenant_rules_removed", tenant=tenant)
        self._shelf.keep_only(self._stage.engines())
        return sum(isinstance(r, _Loaded) for r in results.values()) + len(removed)


def _stamp_of(
    files: tuple[Path, ...], seen: dict[Path, tuple[str, int, int] | tuple[str]]
) -> _Stamp:
    """The stamp of ``files``, each ``stat``-ed once per round (``seen``)."""
    out: list[tuple[str, int, int] | tuple[str]] = []
    for path in files:
        if path not in seen:
            try:
                st = path.stat()
                seen[path] = (str(path), st.st_mtime_ns, st.st_size)
            except OSError:
                seen[path] = (str(path),)
        out.append(seen[path])
    return tuple(out)
