"""One rule engine per distinct rule set, shared by every tenant whose stack makes that set.

A thousand tenants over ten rule stacks need ten engines, not a thousand: :class:`EngineShelf`
hands back the engine already built for an equal ``RuleSet`` (the rules compare by value, so two
files that make the same rules share one), builds one otherwise and records what it cost: the
seconds it took and how much the process's resident memory grew meanwhile (Linux; 0 elsewhere,
and only an estimate where other threads allocate at the same time). The shelf holds at most
``max_engines``; :meth:`EngineShelf.keep_only` forgets the engines no tenant uses any more. A
new engine reuses the keyword and regex matchers of the engine held for the stack below it (the
default's, for a tenant layer over the default; ``pipelines.rules.shared_matchers``), so it
costs what its own changes cost.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pipelines.errors import PipelineError
from pipelines.rules.config import RuleSet
from pipelines.rules.engine import RuleEngine
from pipelines.rules.layers import RuleStack
from pipelines.severe_harm import SevereTable

__all__ = ["Builder", "BuiltEngine", "EngineLimitError", "EngineShelf", "resident_bytes"]

_STATM = Path("/proc/self/statm")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


Builder = Callable[[RuleStack, RuleEngine | None], RuleEngine]
"""Builds the engine of a stack, reusing a base engine's matchers where one is given."""
_Key = tuple[RuleSet, SevereTable]
"""What makes two engines the same: their rules and their severe categories."""


def _engine(stack: RuleStack, base: RuleEngine | None) -> RuleEngine:
    return RuleEngine(stack.ruleset, base=base, severe=stack.severe)


class EngineLimitError(PipelineError):
    """A rule stack that would need one engine more than the shelf may hold."""


@dataclass(frozen=True, slots=True)
class BuiltEngine:
    """An engine and what building it cost."""

    engine: RuleEngine
    stack: str
    """The layers of the stack that first built it, ``default > acme.toml``."""
    key: str
    """That stack's content key, shortened (for logs)."""
    build_s: float
    rss_mb: float
    """Resident memory the process gained while building it (an estimate, 0 where unknown)."""


def resident_bytes() -> int:
    """This process's resident memory now (Linux ``/proc``); 0 where it cannot be read."""
    try:
        return int(_STATM.read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class EngineShelf:
    """Engines by rule set (module docstring); safe to use from several threads."""

    def __init__(self, max_engines: int, build: Builder | None = None) -> None:
        """``build(stack, base)``: the engine of ``stack`` reusing ``base``'s matchers
        (``None``: none to reuse); by default ``RuleEngine(stack.ruleset, base=base,
        severe=stack.severe)``."""
        if max_engines < 1:
            raise ValueError("max_engines must be at least 1")
        self.max_engines = max_engines
        self._build = build or _engine
        self._engines: dict[_Key, BuiltEngine] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._engines)

    def built(self) -> list[BuiltEngine]:
        """The engines held, in the order they were built."""
        with self._lock:
            return list(self._engines.values())

    def add(self, engine: RuleEngine, stack: str = "default") -> None:
        """Hold an engine built elsewhere (the default stack's), so equal stacks share it."""
        with self._lock:
            self._engines.setdefault(
                (engine.ruleset, engine.severe),
                BuiltEngine(engine, stack, "", build_s=0.0, rss_mb=0.0),
            )

    def engine_for(self, stack: RuleStack) -> tuple[BuiltEngine, bool]:
        """The engine of ``stack``'s rules and whether it was built now; raises
        :class:`EngineLimitError` when a new one would pass ``max_engines``."""
        with self._lock:
            found = self._engines.get((stack.ruleset, stack.severe))
            if found is not None:
                return found, False
            if len(self._engines) >= self.max_engines:
                raise EngineLimitError(
                    f"rule stack {' > '.join(stack.names)} would be distinct stack number"
                    f" {len(self._engines) + 1}; at most {self.max_engines} are allowed"
                    " (rules.max_stacks)"
                )
            # Built under the lock: two tenants of one new stack must not build it twice.
            before, started = resident_bytes(), time.perf_counter()
            engine = self._build(stack, self._base_of(stack))
            built = BuiltEngine(
                engine,
                " > ".join(stack.names),
                stack.key[:12],
                build_s=time.perf_counter() - started,
                rss_mb=max(0, resident_bytes() - before) / (1 << 20),
            )
            self._engines[(stack.ruleset, stack.severe)] = built
            return built, True

    def _base_of(self, stack: RuleStack) -> RuleEngine | None:
        """The engine held for the nearest stack below ``stack`` (one that is not itself
        layered), whose matchers the new engine reuses; ``None`` when none is held."""
        below = stack.below
        while below is not None:
            found = self._engines.get((below.ruleset, below.severe))
            if found is not None and not found.engine.is_layered:
                return found.engine
            below = below.below
        return None

    def keep_only(self, in_use: Iterable[RuleEngine]) -> int:
        """Forget every engine not in ``in_use``; how many were forgotten."""
        used = {id(engine) for engine in in_use}
        with self._lock:
            unused = [rs for rs, built in self._engines.items() if id(built.engine) not in used]
            for ruleset in unused:
                del self._engines[ruleset]
        return len(unused)
