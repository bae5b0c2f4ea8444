"""What the open-loop load tools nobody here wrote (ghz, vegeta) share: where the binary is, and
running one as a child process with the CPU it used counted (both run on the machine they
measure, so their own cost is printed beside the service's)."""

from __future__ import annotations

import asyncio
import resource
import shutil
from pathlib import Path

from common.settings import project_root

__all__ = ["find_tool", "run_tool"]


def find_tool(name: str) -> Path | None:
    """The ``name`` that ``scripts/bootstrap.sh`` built (``.venv/bin/<name>``), else one on
    ``PATH``."""
    built = project_root() / ".venv" / "bin" / name
    if built.is_file():
        return built
    found = shutil.which(name)
    return Path(found) if found else None


async def run_tool(argv: list[str], name: str) -> float:
    """Run ``argv`` to its end (stdout discarded); the CPU seconds it used. ``RuntimeError``
    with the tail of its stderr when it exits non-zero."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await process.communicate()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise RuntimeError(f"{name} exited {process.returncode}: {stderr.decode()[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
