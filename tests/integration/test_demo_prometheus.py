"""`modstream demo --with-prometheus`: Debian's Prometheus scrapes the demo's worker and the
demo ends with PromQL answers computed by that Prometheus."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import pytest

pytestmark = pytest.mark.integration


async def test_the_demo_prints_promql_answers_from_a_real_prometheus() -> None:
    """The demo exits 0 and its PromQL block reports a verdict rate above zero, zero lag once
    every record is handled, and verdict counts by decision that add up to the demo's own
    verdict table."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modstream.cli",
        "demo",
        "--messages",
        "160",
        "--with-prometheus",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=dict(os.environ),
    )
    out, _ = await asyncio.wait_for(process.communicate(), 280)
    text = out.decode()
    assert process.returncode == 0, text[-3000:]
    block = text.split("PromQL at ", 1)[1]
    rate = re.search(r"verdicts per second \(peak 15 s window\): ([0-9.e+]+)", block)
    assert rate is not None, block
    assert float(rate.group(1)) > 0, block
    assert "consumer lag (records, all partitions): 0\n" in block
    by_decision = re.search(r"verdicts by decision: (.*)", block)
    assert by_decision is not None, block
    promql_total = sum(int(n) for n in re.findall(r"decision=\w+ (\d+)", by_decision.group(1)))
    table = re.findall(r"^\s{4}(allow|block|flag)\s+\S+\s+(\d+)\s+\d+$", text, re.MULTILINE)
    assert promql_total == sum(int(n) for _, n in table) > 0
