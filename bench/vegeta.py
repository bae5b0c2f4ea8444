"""An open-loop HTTP load from vegeta (github.com/tsenart/vegeta), a tool nobody here wrote.

``scripts/bootstrap.sh`` builds it into ``.venv/bin/vegeta`` through the Go module proxy
(``go install github.com/tsenart/vegeta/v12@v12.13.0``). :func:`vegeta_command` is the attack:
``-rate`` requests per second for ``-duration`` whether or not earlier ones have answered (open
loop), keep-alive connections, the targets (one JSON line per sample comment, each a full
``comments:analyze`` request with the key in ``?key=``, sent round-robin) from a file.
:func:`read_results` reads ``vegeta encode --to=json``: one latency per request (from its send)
and its HTTP status (``0`` with an error: no answer).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

from bench.load_tools import find_tool, run_tool

__all__ = [
    "VegetaRun",
    "analyze_targets",
    "find_vegeta",
    "read_results",
    "vegeta_command",
    "vegeta_load",
]

ANALYZE_PATH = "/v1alpha1/comments:analyze"
ATTRIBUTES = ("TOXICITY", "INSULT", "THREAT")
"""What the load asks for: Perspective's most common request, one harm of each kind."""


def find_vegeta() -> Path | None:
    """The vegeta that bootstrap built (``.venv/bin/vegeta``), else one on ``PATH``."""
    return find_tool("vegeta")


def analyze_targets(
    comments: Sequence[tuple[str, str]], *, port: int, key: str, host: str = "127.0.0.1"
) -> list[dict[str, object]]:
    """vegeta's JSON targets: one stored ``comments:analyze`` call per ``(language, text)``."""
    url = f"http://{host}:{port}{ANALYZE_PATH}?key={key}"
    targets: list[dict[str, object]] = []
    for language, text in comments:
        body = {
            "comment": {"text": text},
            "requestedAttributes": {name: {} for name in ATTRIBUTES},
            "languages": [language],
        }
        targets.append(
            {
                "method": "POST",
                "url": url,
                "body": base64.b64encode(orjson.dumps(body)).decode(),
                "header": {"Content-Type": ["application/json"]},
            }
        )
    return targets


def vegeta_command(
    vegeta: Path,
    *,
    rate: float,
    seconds: float,
    timeout_s: float,
    targets_file: Path,
    results_file: Path,
) -> list[str]:
    """The open-loop attack (see the module docstring)."""
    return [
        str(vegeta),
        "attack",
        "-format=json",
        f"-targets={targets_file}",
        f"-rate={rate:.0f}/s",
        f"-duration={seconds:g}s",
        f"-timeout={timeout_s * 1000:.0f}ms",
        "-keepalive=true",
        "-workers=50",
        f"-output={results_file}",
    ]


def read_results(lines: Iterable[bytes]) -> tuple[list[float], Counter[str], float]:
    """Latencies of the 200 answers (ms), requests per status (``"200"``, ``"429"``, ``"0"``
    for no answer), and the attack's seconds (first send to last answer), from
    ``vegeta encode --to=json`` lines (latencies in nanoseconds, timestamps RFC 3339)."""
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    first: float | None = None
    last = 0.0
    for line in lines:
        if not line.strip():
            continue
        result = orjson.loads(line)
        code = int(result.get("code") or 0)
        statuses[str(code)] += 1
        latency_ms = float(result["latency"]) / 1e6
        if code == 200:
            latencies.append(latency_ms)
        sent = _seconds(str(result["timestamp"]))
        first = sent if first is None else min(first, sent)
        last = max(last, sent + latency_ms / 1000.0)
    return latencies, statuses, (last - first) if first is not None else 0.0


def _seconds(timestamp: str) -> float:
    """Seconds since the epoch of an RFC 3339 timestamp with nanoseconds (Python's
    ``fromisoformat`` takes at most microseconds)."""
    head, _, rest = timestamp.partition(".")
    if not rest:
        return datetime.fromisoformat(timestamp).timestamp()
    digits = "".join(itertools.takewhile(str.isdigit, rest))
    zone = rest[len(digits) :]
    base = datetime.fromisoformat(head + (zone if zone != "Z" else "+00:00")).timestamp()
    return base + float(f"0.{digits or 0}")


@dataclass(frozen=True, slots=True)
class VegetaRun:
    latencies_ms: list[float]
    """Of the 200 answers, each from its send."""
    statuses: Counter[str]
    seconds: float
    client_cpu_s: float


async def vegeta_load(
    vegeta: Path,
    *,
    port: int,
    key: str,
    comments: Sequence[tuple[str, str]],
    rate: float,
    seconds: float,
    timeout_s: float,
) -> VegetaRun:
    """Attack ``comments:analyze`` on ``port`` and read every request's result."""
    with tempfile.TemporaryDirectory(prefix="bench-vegeta-") as tmp:
        targets_file, results_file = Path(tmp) / "targets.jsonl", Path(tmp) / "results.bin"
        targets = analyze_targets(comments, port=port, key=key)
        targets_file.write_bytes(b"\n".join(orjson.dumps(t) for t in targets) + b"\n")
        argv = vegeta_command(
            vegeta,
            rate=rate,
            seconds=seconds,
            timeout_s=timeout_s,
            targets_file=targets_file,
            results_file=results_file,
        )
        cpu = await run_tool(argv, "vegeta")
        encode = await asyncio.create_subprocess_exec(
            str(vegeta),
            "encode",
            "--to=json",
            str(results_file),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await encode.communicate()
        if encode.returncode != 0:
            raise RuntimeError(f"vegeta encode exited {encode.returncode}: {err.decode()[-500:]}")
    latencies, statuses, wall = read_results(out.splitlines())
    return VegetaRun(latencies, statuses, wall, cpu)
