"""The lifecycle every local service shares: prepare once, spawn, wait healthy, stop.

Subclasses say how to prepare their files, which command to run, how to tell they are healthy
and what to do once they are (create a role, topics). ``start`` is idempotent: a service that is
already running (its pid file names a live process of ours) is only waited on, not started again.
"""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from stack.process import (
    PidFile,
    exit_description,
    locked,
    owns,
    spawn,
    terminate,
    wait_until,
)
from stack.settings import StackSettings

__all__ = ["LocalService", "ServiceStatus"]


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """What ``modstream stack status`` prints for one service."""

    name: str
    running: bool
    healthy: bool
    pid: int | None
    endpoint: str
    log_path: Path


class LocalService(ABC):
    """One service of the local stack, run as a detached child with a pid file."""

    name: ClassVar[str]
    stop_signal: ClassVar[int] = signal.SIGTERM
    start_timeout_s: ClassVar[float] = 120.0
    stop_timeout_s: ClassVar[float] = 30.0

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.directory = settings.state_dir / self.name
        self.pid_file = PidFile(self.directory / f"{self.name}.pid")
        self.lock_path = self.directory / f"{self.name}.lock"

    # --- what subclasses provide -------------------------------------------------------------

    @property
    @abstractmethod
    def endpoint(self) -> str:
        """Where clients connect, e.g. ``127.0.0.1:19092``."""

    @property
    @abstractmethod
    def log_path(self) -> Path:
        """The service's main log file."""

    @property
    @abstractmethod
    def marker(self) -> str:
        """A string in our process's command line and nobody else's (a state-folder path)."""

    @abstractmethod
    def ports(self) -> tuple[int, ...]:
        """TCP ports on :attr:`host` the process binds."""

    @property
    def host(self) -> str:
        """The loopback address the process binds its ports on."""
        return "127.0.0.1"

    @abstractmethod
    def prepare(self) -> None:
        """Make the files the process needs; cheap when they already exist."""

    @abstractmethod
    def command(self) -> tuple[Sequence[str], Mapping[str, str] | None]:
        """The argument vector and environment (``None``: inherit) of the process."""

    @abstractmethod
    def healthy(self) -> bool:
        """One quick health probe; never raises."""

    def check(self) -> None:
        """Fail fast, before anything is started, when this service cannot start (cheap)."""
        return

    def after_healthy(self) -> None:
        """Work done once the service answers (roles, databases); idempotent."""
        return

    @property
    def stdout_path(self) -> Path:
        """Where the process's stdout and stderr go."""
        return self.log_path

    # --- the shared lifecycle ----------------------------------------------------------------

    def pid(self) -> int | None:
        """The pid of our running process, or ``None`` when it is not running."""
        recorded = self.pid_file.read()
        return recorded if owns(recorded, self.marker) else None

    def is_outdated(self, pid: int) -> bool:
        """Whether our running process ``pid`` was started with settings that changed since."""
        return False

    def is_running(self) -> bool:
        """Whether our process is alive (healthy or not)."""
        return self.pid() is not None

    def launch(self) -> bool:
        """Spawn the process unless ours already runs; ``True`` when it was spawned now."""
        with locked(self.lock_path):
            running = self.pid()
            if running is not None:
                if not self.is_outdated(running):
                    return False
                # Running with a configuration that no longer holds (e.g. another model
                # repository): replace it, so ``up`` converges on the settings.
                terminate(
                    running,
                    self.marker,
                    stop_signal=self.stop_signal,
                    timeout_s=self.stop_timeout_s,
                )
            self.pid_file.remove()
            self.prepare()
            argv, env = self.command()
            pid = spawn(
                argv, log_path=self.stdout_path, env=env, ports=self.ports(), host=self.host
            )
            self.pid_file.write(pid)
            return True

    def wait_ready(self) -> None:
        """Block until healthy, then run :meth:`after_healthy`; raise ``ServiceStartError``."""
        pid = self.pid_file.read()
        wait_until(
            self.healthy,
            timeout_s=self.start_timeout_s,
            what=f"{self.name} at {self.endpoint} (pid {pid})",
            alive=self.is_running,
            exit_note=(lambda: exit_description(pid)) if pid is not None else None,
            log_path=self.log_path,
        )
        self.after_healthy()

    def start(self) -> bool:
        """Launch (unless running) and wait until healthy; ``True`` when started now."""
        started = self.launch()
        self.wait_ready()
        return started

    def stop(self) -> bool:
        """Stop our process (never anyone else's); ``True`` when one was stopped."""
        with locked(self.lock_path):
            recorded = self.pid_file.read()
            stopped = False
            if recorded is not None:
                stopped = terminate(
                    recorded,
                    self.marker,
                    stop_signal=self.stop_signal,
                    timeout_s=self.stop_timeout_s,
                )
            self.pid_file.remove()
            return stopped

    def status(self) -> ServiceStatus:
        """Running, healthy, pid, endpoint and log path, probed now."""
        pid = self.pid()
        return ServiceStatus(
            name=self.name,
            running=pid is not None,
            healthy=pid is not None and self.healthy(),
            pid=pid,
            endpoint=self.endpoint,
            log_path=self.log_path,
        )
