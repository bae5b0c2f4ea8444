"""``modstream rescan``'s arguments: each mistake is a usage error (exit 2) with a clear message,
before anything connects to Kafka, PostgreSQL or the model."""

from __future__ import annotations

import io

import pytest

from modstream.cli import main
from worker import rescan_command
from worker.rescan_command import ProgressPrinter
from worker.rescan_report import RescanReport


@pytest.fixture(autouse=True)
def _logging_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command configures structlog for the process; here that would bind later tests'
    log lines to this test's captured (then closed) stderr."""
    monkeypatch.setattr(rescan_command, "configure_logging", lambda _level: None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rescan", "--model", "moderation:2"], "needs --since and --model"),
        (["rescan", "--since", "7d"], "needs --since and --model"),
        (["rescan", "--resume", "not-a-uuid"], "is not a rescan id"),
        (["rescan", "--since", "1d", "--until", "2d", "--model", "m"], "must be before --until"),
        (["rescan", "--since", "yesterday", "--model", "m"], "expected a duration ago"),
        (["rescan", "--since", "2026-01-01T00:00:00", "--model", "m"], "needs its UTC offset"),
        (["rescan", "--since", "1d", "--model", "bad name!"], "expected NAME or NAME:VERSION"),
    ],
)
def test_a_bad_request_is_a_usage_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--rate", "--batch", "--wait-ready-s"])
def test_a_rate_batch_or_wait_that_is_not_positive_is_refused(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["rescan", "--since", "1d", "--model", "m", flag, "0"])
    assert exited.value.code == 2
    assert "must be positive" in capsys.readouterr().err


def test_progress_is_a_bar_on_a_terminal_and_json_lines_otherwise() -> None:
    report = RescanReport(window=200, read=50, changed=3)
    bar = io.StringIO()
    ProgressPrinter(bar, tty=True)(report, final=True)
    assert "25.0% 50/200" in bar.getvalue()
    assert bar.getvalue().endswith("\n")

    now = [0.0]
    lines = io.StringIO()
    printer = ProgressPrinter(lines, tty=False, interval_s=1.0, clock=lambda: now[0])
    printer(report)
    printer(report)  # within the interval: not printed
    now[0] = 2.0
    printer(report)
    printed = lines.getvalue().splitlines()
    assert len(printed) == 2
    assert '"event":"rescan_progress"' in printed[0]
    assert '"fraction":0.25' in printed[0]
