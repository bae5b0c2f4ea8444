"""The quick chaos subset (``python -m tests.chaos --quick``) as part of the test run.

It kills the worker with SIGKILL at random moments and at every failpoint, stops Triton and then
PostgreSQL for 10 s each under steady traffic, feeds generated bad records mixed with good ones,
reloads rule files under a running worker, sends SIGTERM while Kafka (then Kafka and PostgreSQL)
is down, and poisons batch writes with values the driver refuses; each scenario checks its
ledger (every produced record is exactly one verdict row or one dead letter).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from common.settings import project_root

pytestmark = pytest.mark.integration

_SUMMARY = re.compile(
    r"^scenarios=(\d+) passed=(\d+) lost=(\d+) duplicates=(\d+) max_rss_mb=(\d+)$"
)


@pytest.mark.timeout(900)
def test_quick_chaos_subset_loses_and_doubles_nothing(tmp_path: Path) -> None:
    """Scenarios 1, 2, 3, 6, 7, 8 and 9 at small sizes all pass with lost=0 and duplicates=0,
    and the last line is the exact summary format."""
    run = subprocess.run(
        [sys.executable, "-m", "tests.chaos", "--quick", "--run-dir", str(tmp_path)],
        cwd=project_root(),
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    lines = run.stdout.strip().splitlines()
    # The scenario lines and their failures first: stderr is mostly client-library noise.
    report = "\n".join(
        line
        for line in (run.stdout + run.stderr).splitlines()
        if line.startswith(("scenario", "  failure", "  not settled", "Traceback"))
    )
    assert lines, report + run.stderr[-3000:]
    match = _SUMMARY.match(lines[-1])
    assert match is not None, report + run.stdout[-2000:] + run.stderr[-2000:]
    scenarios, passed, lost, duplicates, max_rss_mb = (int(g) for g in match.groups())
    assert run.returncode == 0, f"{report}\nworker logs kept in {tmp_path}"
    assert scenarios == passed == 7
    assert (lost, duplicates) == (0, 0)
    assert max_rss_mb > 0
