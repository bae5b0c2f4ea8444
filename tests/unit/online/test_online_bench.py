"""bench.online's arithmetic (nearest-rank percentiles, achieved rate, real-model target) and
bench.ghz's command line and report."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from bench.ghz import ghz_command, ghz_data, read_report
from bench.online import LoadResult, _real_available, percentile, real_target_ms


def test_percentiles_use_the_nearest_rank() -> None:
    """p50/p99 of 1..100 are 50 and 99; a single value is every percentile; none gives 0."""
    values = [float(v) for v in range(100, 0, -1)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 99) == 0.0


def test_achieved_rate_counts_answered_calls_only() -> None:
    """Refused calls add no latency and no rate: 300 answers in 2 s is 150/s."""
    result = LoadResult([1.0] * 300, Counter({"OK": 300, "RESOURCE_EXHAUSTED": 50}), 2.0, 3.0)
    assert result.rps == 150.0
    assert result.p99_ms == 1.0


def test_the_real_target_is_twice_the_batch_32_time() -> None:
    assert real_target_ms(230.0) == 460.0


def test_the_real_leg_runs_only_on_a_built_repository(tmp_path: Path) -> None:
    """An unbuilt repository or --no-real skips it with the reason; a URL needs no build."""
    args = argparse.Namespace(no_real=False, real_triton_url=None, model_repository=tmp_path)
    assert "is not built" in str(_real_available(args))
    (tmp_path / "encoder" / "1").mkdir(parents=True)
    (tmp_path / "encoder" / "1" / "model.onnx").write_bytes(b"")
    assert _real_available(args) is None
    assert _real_available(argparse.Namespace(**{**vars(args), "no_real": True})) == "--no-real"
    elsewhere = argparse.Namespace(
        no_real=False, real_triton_url="h:1", model_repository=tmp_path / "x"
    )
    assert _real_available(elsewhere) is None


def test_the_ghz_report_gives_ok_latencies_and_status_counts() -> None:
    """ghz's JSON details (nanoseconds) become OK latencies in ms and calls per status."""
    report = {
        "total": 2_000_000_000,
        "details": [
            {"latency": 5_000_000, "status": "OK"},
            {"latency": 7_500_000, "status": "OK"},
            {"latency": 1_000_000_000, "status": "DeadlineExceeded"},
        ],
    }
    latencies, statuses, seconds = read_report(report)
    assert latencies == [5.0, 7.5]
    assert statuses == Counter({"OK": 2, "DeadlineExceeded": 1})
    assert seconds == 2.0


def test_ghz_runs_open_loop_with_a_new_message_per_call(tmp_path: Path) -> None:
    """The command sends asynchronously at the rate, for the duration, with the token; every
    template gets its own message id and timestamp; texts that look like templates are left out."""
    argv = ghz_command(
        Path("/x/ghz"),
        port=18070,
        token="t0k",
        rate=500,
        seconds=10,
        deadline_s=1.0,
        data_file=tmp_path / "d.json",
        report_file=tmp_path / "r.json",
    )
    assert {"--async", "--rps=500", "--duration=10s", "--timeout=1000ms"} <= set(argv)
    assert '--metadata={"authorization":"Bearer t0k"}' in argv
    assert argv[-1] == "127.0.0.1:18070"
    data = ghz_data(["hello", "a {{.Leak}} b"])
    assert [d["text"] for d in data] == ["hello"]
    assert data[0]["message_id"] == "ghz-{{.UUID}}"
    assert data[0]["sent_at"] == "{{.Timestamp}}"
