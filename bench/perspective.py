"""``python -m bench.perspective``: ``comments:analyze`` against ``CheckMessage``, open loop.

One ``modstream online`` process (throw-away database and verdict topic, ``bench.online``)
serves both: gRPC ``CheckMessage`` loaded by ghz (``bench.ghz``) and the HTTP
``comments:analyze`` loaded by vegeta (``bench.vegeta``), each at ``--rate`` requests per second,
open loop (arrivals at the rate whether or not earlier calls answered), every call a stored
verdict of a sample chat line (English and Chinese, benign, abusive, spam). After a short
warm-up of each, the legs run one after the other in the order ghz, vegeta, vegeta, ghz
(``--rounds`` times), so a drift of the shared machine weighs on both alike; each tool's
latencies are pooled over its legs. The per-key quota is lifted for the run.

Printed per leg: p50/p95/p99, achieved rate, statuses, and the CPU the load tool itself used
(``client_cores``: both tools run on the machine they measure). Last line:
``perspective_p99_ms=A checkmessage_p99_ms=B rps=R errors=E``: the pooled p99 of each (ms, of
the answered calls, from each call's send), the lower of the two achieved rates (answered calls
per second), and the calls of both that got no answer or an error status.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.ghz import find_ghz, ghz_load
from bench.online import free_port, online_process, percentile, scratch
from bench.vegeta import find_vegeta, vegeta_load
from online.settings import OnlineSettings
from stack.samples import load_texts

__all__ = ["Pooled", "leg_order", "main", "summary_line"]

GHZ, VEGETA = "checkmessage", "perspective"


def leg_order(rounds: int) -> list[str]:
    """ghz, vegeta, vegeta, ghz, ``rounds`` times (A-B-B-A)."""
    return [GHZ, VEGETA, VEGETA, GHZ] * rounds


@dataclass(slots=True)
class Pooled:
    """One tool's legs together."""

    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def rps(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds > 0 else 0.0

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status not in {"OK", "200"})

    def add(self, latencies: Sequence[float], statuses: Counter[str], seconds: float) -> None:
        self.latencies_ms.extend(latencies)
        self.statuses.update(statuses)
        self.seconds += seconds


def summary_line(perspective: Pooled, checkmessage: Pooled) -> str:
    """The bench's last line."""
    return (
        f"perspective_p99_ms={percentile(perspective.latencies_ms, 99):.1f} "
        f"checkmessage_p99_ms={percentile(checkmessage.latencies_ms, 99):.1f} "
        f"rps={min(perspective.rps, checkmessage.rps):.1f} "
        f"errors={perspective.errors + checkmessage.errors}"
    )


def _leg_report(
    name: str,
    latencies: Sequence[float],
    statuses: Counter[str],
    seconds: float,
    client_cpu_s: float | None = None,
) -> None:
    rate = len(latencies) / seconds if seconds > 0 else 0.0
    client = (
        f" client_cores={client_cpu_s / seconds:.2f}"
        if client_cpu_s is not None and seconds > 0
        else ""
    )
    print(
        f"{name}: achieved={rate:.1f}/s p50={percentile(latencies, 50):.1f}ms "
        f"p95={percentile(latencies, 95):.1f}ms p99={percentile(latencies, 99):.1f}ms "
        f"statuses={dict(statuses)}{client}",
        flush=True,
    )


async def _run(args: argparse.Namespace) -> tuple[Pooled, Pooled]:
    ghz, vegeta = find_ghz(), find_vegeta()
    if ghz is None or vegeta is None:
        raise SystemExit("ghz and vegeta are needed: scripts/bootstrap.sh builds both")
    settings = OnlineSettings()
    rows = load_texts()
    texts = [text for _, _, text in rows]
    comments = [(language, text) for _, language, text in rows]
    deadline_s = args.deadline_ms / 1000.0
    pooled = {GHZ: Pooled(), VEGETA: Pooled()}
    async with scratch(settings) as (dsn, topic, token):
        port, http_port, analyze_port = free_port(), free_port(), free_port()
        env = {
            "MODSTREAM_POSTGRES__DSN": dsn,
            "MODSTREAM_KAFKA__VERDICT_TOPIC": topic,
            "MODSTREAM_ONLINE__PORT": str(port),
            "MODSTREAM_ONLINE__HEALTH_INTERVAL_S": "0.5",
            "MODSTREAM_HTTP__PORT": str(http_port),
            "MODSTREAM_PERSPECTIVE__PORT": str(analyze_port),
            "MODSTREAM_PERSPECTIVE__QPS": "1000000",
            "MODSTREAM_PERSPECTIVE__BURST": "1000000",
            "MODSTREAM_TRITON__GRPC_URL": settings.triton.replica_urls[0],
            "MODSTREAM_LOG_LEVEL": "warning",
        }
        async with online_process(env, port):
            warm = min(args.rate, 50.0)
            await ghz_load(
                ghz,
                port=port,
                token=token,
                texts=texts,
                rate=warm,
                seconds=1.0,
                deadline_s=deadline_s,
            )
            await vegeta_load(
                vegeta,
                port=analyze_port,
                key=token,
                comments=comments,
                rate=warm,
                seconds=1.0,
                timeout_s=deadline_s,
            )
            for leg in leg_order(args.rounds):
                if leg == GHZ:
                    g = await ghz_load(
                        ghz,
                        port=port,
                        token=token,
                        texts=texts,
                        rate=args.rate,
                        seconds=args.seconds,
                        deadline_s=deadline_s,
                    )
                    latencies, statuses, seconds = g.latencies_ms, g.statuses, g.seconds
                    client_cpu = g.client_cpu_s
                else:
                    v = await vegeta_load(
                        vegeta,
                        port=analyze_port,
                        key=token,
                        comments=comments,
                        rate=args.rate,
                        seconds=args.seconds,
                        timeout_s=deadline_s,
                    )
                    latencies, statuses, seconds = v.latencies_ms, v.statuses, v.seconds
                    client_cpu = v.client_cpu_s
                _leg_report(leg, latencies, statuses, seconds, client_cpu)
                pooled[leg].add(latencies, statuses, seconds)
    return pooled[VEGETA], pooled[GHZ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.perspective", description=__doc__)
    parser.add_argument("--rate", type=float, default=300.0, help="requests per second, each")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per leg")
    parser.add_argument("--rounds", type=int, default=1, help="A-B-B-A rounds")
    parser.add_argument("--deadline-ms", type=float, default=1000.0, help="per-call timeout")
    args = parser.parse_args(argv)
    perspective, checkmessage = asyncio.run(_run(args))
    for name, pool in ((VEGETA, perspective), (GHZ, checkmessage)):
        _leg_report(f"{name} (pooled)", pool.latencies_ms, pool.statuses, pool.seconds)
    print(summary_line(perspective, checkmessage), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
