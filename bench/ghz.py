"""An open-loop load from ghz (github.com/bojand/ghz), a gRPC load tool nobody here wrote.

``scripts/bootstrap.sh`` builds it into ``.venv/bin/ghz`` through the Go module proxy
(``go install github.com/bojand/ghz/cmd/ghz@v0.93.0``, what ``@latest`` resolves to there).
:func:`ghz_command` is the command line: ``--async`` with ``--rps`` sends at the fixed rate
whether or not earlier calls have answered (open loop), over one HTTP/2 connection, for a fixed
duration, with every call's own ``message_id`` and ``sent_at`` (ghz's templates), the token as
metadata and the method read from ``online/api/moderation.proto``. :func:`ghz_load` runs it and
reads its JSON report: one latency per call (from its send) and its status.
"""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.load_tools import find_tool, run_tool
from common.settings import project_root

__all__ = ["GhzRun", "find_ghz", "ghz_command", "ghz_data", "ghz_load", "read_report"]

METHOD = "modstream.v1.ModerationService.CheckMessage"
PROTO = project_root() / "online" / "api" / "moderation.proto"
"""The contract, read by ghz itself (its reflection client cannot resolve a method symbol from
Python's reflection service)."""


def find_ghz() -> Path | None:
    """The ghz that bootstrap built (``.venv/bin/ghz``), else one on ``PATH``."""
    return find_tool("ghz")


def ghz_data(texts: Sequence[str], *, seed: int = 2026) -> list[dict[str, str]]:
    """One request template per sample text, sent round-robin: ghz fills ``{{.UUID}}`` and
    ``{{.Timestamp}}`` per call, so every call is a new message (none is a repeat)."""
    rng = random.Random(seed)
    return [
        {
            "message_id": "ghz-{{.UUID}}",
            "group_id": f"group-{rng.randrange(50)}",
            "sender_id": f"user-{rng.randrange(5000)}",
            "text": text,
            "sent_at": "{{.Timestamp}}",
        }
        for text in texts
        if "{{" not in text and "}}" not in text  # would be read as a template
    ]


def ghz_command(
    ghz: Path,
    *,
    port: int,
    token: str,
    rate: float,
    seconds: float,
    deadline_s: float,
    data_file: Path,
    report_file: Path,
    host: str = "127.0.0.1",
) -> list[str]:
    """The open-loop ghz run (see the module docstring)."""
    return [
        str(ghz),
        "--insecure",
        "--async",
        f"--rps={rate:.0f}",
        f"--duration={seconds:g}s",
        "--duration-stop=wait",
        f"--timeout={deadline_s * 1000:.0f}ms",
        "--connections=1",
        "--concurrency=50",
        f"--proto={PROTO}",
        f"--import-paths={PROTO.parent}",
        f"--call={METHOD}",
        f"--data-file={data_file}",
        "--metadata=" + orjson.dumps({"authorization": f"Bearer {token}"}).decode(),
        "--format=json",
        f"--output={report_file}",
        f"{host}:{port}",
    ]


@dataclass(frozen=True, slots=True)
class GhzRun:
    """What one ghz run measured."""

    latencies_ms: list[float]
    """Of the calls answered OK, each from its send."""
    statuses: Counter[str]
    seconds: float
    """ghz's own wall time for the run."""
    client_cpu_s: float
    """CPU ghz used (user + system)."""


def read_report(report: Mapping[str, Any]) -> tuple[list[float], Counter[str], float]:
    """Latencies of the OK calls (ms), calls per status, and the run's seconds, from ghz's
    ``--format=json`` report (durations are nanoseconds)."""
    details = report.get("details") or []
    latencies = [float(d["latency"]) / 1e6 for d in details if d.get("status") == "OK"]
    statuses = Counter(str(d.get("status") or "unknown") for d in details)
    return latencies, statuses, float(report.get("total", 0)) / 1e9


async def ghz_load(
    ghz: Path,
    *,
    port: int,
    token: str,
    texts: Sequence[str],
    rate: float,
    seconds: float,
    deadline_s: float,
) -> GhzRun:
    """Run ghz against the service on ``port`` and read its report."""
    with tempfile.TemporaryDirectory(prefix="bench-ghz-") as tmp:
        data_file, report_file = Path(tmp) / "data.json", Path(tmp) / "report.json"
        data_file.write_bytes(orjson.dumps(ghz_data(texts)))
        argv = ghz_command(
            ghz,
            port=port,
            token=token,
            rate=rate,
            seconds=seconds,
            deadline_s=deadline_s,
            data_file=data_file,
            report_file=report_file,
        )
        cpu = await run_tool(argv, "ghz")
        latencies, statuses, wall = read_report(orjson.loads(report_file.read_bytes()))
    return GhzRun(latencies, statuses, wall, cpu)
