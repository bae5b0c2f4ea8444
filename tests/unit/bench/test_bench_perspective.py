"""bench.perspective and bench.vegeta without running anything: vegeta's command line and
targets, the reading of its results, the leg order and the last line."""

from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path

import orjson
import pytest

from bench.perspective import Pooled, leg_order, summary_line
from bench.vegeta import analyze_targets, read_results, vegeta_command


def test_the_attack_is_open_loop_at_the_rate_from_the_targets_file() -> None:
    argv = vegeta_command(
        Path("/x/vegeta"),
        rate=300,
        seconds=10,
        timeout_s=1.0,
        targets_file=Path("/t/targets.jsonl"),
        results_file=Path("/t/results.bin"),
    )
    assert argv[:2] == ["/x/vegeta", "attack"]
    assert {
        "-format=json",
        "-targets=/t/targets.jsonl",
        "-rate=300/s",
        "-duration=10s",
        "-timeout=1000ms",
        "-keepalive=true",
        "-output=/t/results.bin",
    } <= set(argv)


def test_each_target_is_a_stored_analyze_call_with_the_key_in_the_query() -> None:
    targets = analyze_targets([("en", "hello"), ("zh", "你好")], port=8080, key="k-1")
    assert [t["url"] for t in targets] == [
        "http://127.0.0.1:8080/v1alpha1/comments:analyze?key=k-1"
    ] * 2
    bodies = [orjson.loads(base64.b64decode(str(t["body"]))) for t in targets]
    assert [b["comment"]["text"] for b in bodies] == ["hello", "你好"]
    assert [b["languages"] for b in bodies] == [["en"], ["zh"]]
    assert all("doNotStore" not in b for b in bodies)
    assert set(bodies[0]["requestedAttributes"]) == {"TOXICITY", "INSULT", "THREAT"}
    assert targets[0]["method"] == "POST"


def test_results_give_the_200_latencies_every_status_and_the_span() -> None:
    lines = [
        b'{"code":200,"latency":5000000,"timestamp":"2026-12-07T10:00:00.000000000Z"}',
        b'{"code":429,"latency":1000000,"timestamp":"2026-12-07T10:00:00.5Z"}',
        b'{"code":0,"latency":1000000000,"error":"timeout",'
        b'"timestamp":"2026-12-07T10:00:01.000000001+00:00"}',
        b"",
        b'{"code":200,"latency":7000000,"timestamp":"2026-12-07T10:00:02.250000000Z"}',
    ]
    latencies, statuses, seconds = read_results(lines)
    assert latencies == [5.0, 7.0]
    assert statuses == Counter({"200": 2, "429": 1, "0": 1})
    assert seconds == pytest.approx(2.257, abs=1e-6)


def test_legs_alternate_abba() -> None:
    assert leg_order(2) == ["checkmessage", "perspective", "perspective", "checkmessage"] * 2


def test_the_last_line_pools_each_tool_and_counts_every_failure() -> None:
    perspective, checkmessage = Pooled(), Pooled()
    perspective.add([float(v) for v in range(1, 101)], Counter({"200": 100, "503": 2}), 1.0)
    perspective.add([50.0] * 100, Counter({"200": 100}), 1.0)
    checkmessage.add([10.0] * 150, Counter({"OK": 150, "DEADLINE_EXCEEDED": 1}), 0.5)
    assert summary_line(perspective, checkmessage) == (
        "perspective_p99_ms=98.0 checkmessage_p99_ms=10.0 rps=100.0 errors=3"
    )
