"""``python -m tests.chaos [--quick] [--only 1,6,7] [--seed N] [--model-repository DIR]``: run
the scenarios, print a line per scenario, write ``results.json`` in the run folder, and end with
exactly ``scenarios=N passed=N lost=0 duplicates=0 max_rss_mb=M``. Exit status 0 only if all
passed. ``--model-repository`` serves that Triton repository (the real models, say) from a
private ``tritonserver`` for the whole run: the workers use it and scenario 2 stops and starts it;
scenario 12 still starts its own server over the test fixture, whose reject marker it needs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import orjson

from stack import private_triton
from tests.chaos.harness import ChaosEnv, ScenarioResult
from tests.chaos.scenarios import QUICK, SCENARIOS, Sizes

QUICK_SCENARIOS = (1, 2, 3, 6, 7, 8, 9)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="scenarios 1, 2, 3, 6, 7, 8, 9 at small sizes"
    )
    parser.add_argument("--only", help="comma-separated scenario numbers (default: all)")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--run-dir", type=Path, help="where worker logs go (default: a temp dir)")
    parser.add_argument(
        "--model-repository",
        type=Path,
        help="serve this Triton model repository from a private server for the run",
    )
    return parser.parse_args(argv)


async def _run(args: argparse.Namespace) -> list[ScenarioResult]:
    sizes: Sizes = QUICK if args.quick else Sizes()
    chosen = [int(x) for x in args.only.split(",")] if args.only else None
    numbers = chosen or (list(QUICK_SCENARIOS) if args.quick else sorted(SCENARIOS))
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="modstream-chaos-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"chaos run: scenarios {numbers}, logs in {run_dir}", flush=True)
    env = ChaosEnv(run_dir)
    with contextlib.ExitStack() as servers:
        if args.model_repository is not None:
            server = servers.enter_context(
                private_triton(args.model_repository.resolve(), run_dir / "triton", _ports(3))
            )
            env.triton, env.triton_url = server, server.endpoint
            print(f"private triton {server.endpoint} over {args.model_repository}", flush=True)
        return await _run_scenarios(env, numbers, sizes, args.seed, run_dir)


async def _run_scenarios(
    env: ChaosEnv, numbers: list[int], sizes: Sizes, seed: int, run_dir: Path
) -> list[ScenarioResult]:
    await env.create()
    results: list[ScenarioResult] = []
    try:
        for number in numbers:
            rng = random.Random(seed + number)
            env.rss.reset()
            started = time.monotonic()
            try:
                result = await SCENARIOS[number](env, sizes, rng)
            except Exception as exc:
                result = ScenarioResult(number, SCENARIOS[number].__name__)
                result.failures.append(f"crashed: {exc!r}")
                traceback.print_exc()
            result.seconds = round(time.monotonic() - started, 1)
            result.peak_rss_mb = max(result.peak_rss_mb, env.rss.reset())
            result.passed = not result.failures
            results.append(result)
            print(
                f"scenario {number} {'PASS' if result.passed else 'FAIL'} {result.name}: "
                f"messages={result.messages} kills={result.kills} lost={result.lost} "
                f"duplicates={result.duplicates} recovery_s={result.recovery_s} "
                f"peak_rss_mb={result.peak_rss_mb} seconds={result.seconds}",
                flush=True,
            )
            print(f"  figures: {orjson.dumps(result.figures).decode()}", flush=True)
            for failure in result.failures:
                print(f"  failure: {failure}", flush=True)
    finally:
        await env.drop()
    (run_dir / "results.json").write_bytes(
        orjson.dumps([asdict(r) for r in results], option=orjson.OPT_INDENT_2)
    )
    print(f"results: {run_dir / 'results.json'}", flush=True)
    return results


def _ports(count: int) -> tuple[int, int, int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        http, grpc, metrics = (int(sock.getsockname()[1]) for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()
    return http, grpc, metrics


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    results = asyncio.run(_run(args))
    passed = sum(r.passed for r in results)
    lost = sum(r.lost for r in results)
    duplicates = sum(r.duplicates for r in results)
    max_rss = max((r.peak_rss_mb for r in results), default=0.0)
    print(
        f"scenarios={len(results)} passed={passed} lost={lost} duplicates={duplicates} "
        f"max_rss_mb={round(max_rss)}",
        flush=True,
    )
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
