"""common.logs: library log lines become JSON, and a flood of repeats becomes one line a window."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import orjson
import pytest
import structlog

from common.logs import RepeatSummary, configure_logging, get_logger


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _record(msg: str, name: str = "aiokafka.conn") -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, None, None)


def test_repeats_within_the_window_are_dropped_and_counted() -> None:
    """The first line passes, repeats are dropped, the next window's line carries the count."""
    clock = _Clock()
    summary = RepeatSummary(interval_s=30.0, clock=clock)
    assert summary.filter(_record("Unable connect to node %s"))
    assert not any(summary.filter(_record("Unable connect to node %s")) for _ in range(500))
    clock.now = 31.0
    again = _record("Unable connect to node %s")
    assert summary.filter(again)
    assert getattr(again, "repeated", None) == 500


def test_different_templates_and_loggers_are_counted_apart() -> None:
    """Another message template or another logger is not swallowed by an earlier one."""
    summary = RepeatSummary(interval_s=30.0, clock=_Clock())
    assert summary.filter(_record("a %s"))
    assert summary.filter(_record("b %s"))
    assert summary.filter(_record("a %s", name="asyncio"))
    assert not summary.filter(_record("a %s"))


@pytest.fixture
def restore_root_logging() -> Iterator[None]:
    """configure_logging replaces the root handlers and structlog's output; undo both after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


@pytest.mark.usefixtures("restore_root_logging")
def test_library_lines_are_json_with_the_repeat_count(capsys: pytest.CaptureFixture[str]) -> None:
    """A standard-library logger's lines reach stderr as JSON, one per window with `repeated`."""
    configure_logging("info", summary_interval_s=3600.0)
    noisy = logging.getLogger("aiokafka.test")
    for _ in range(1000):
        noisy.error("Unable connect to node with id %s", 1)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1
    entry = orjson.loads(lines[0])
    assert entry["logger"] == "aiokafka.test"
    assert entry["event"] == "Unable connect to node with id 1"
    assert entry["level"] == "error"


def _log_library_exception() -> None:
    try:
        raise ConnectionError("Connection at 127.0.0.1:19092 closed\nsecond line with details")
    except ConnectionError:
        logging.getLogger("aiokafka.consumer").exception("Error sending OffsetCommitRequest")


@pytest.mark.usefixtures("restore_root_logging")
def test_library_exceptions_are_one_line_without_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A library's logged exception becomes its type and first line, never a traceback."""
    configure_logging("info", summary_interval_s=3600.0)
    _log_library_exception()
    err = capsys.readouterr().err
    entry = orjson.loads(err.strip().splitlines()[-1])
    assert entry["exception_type"] == "ConnectionError"
    assert entry["exception"] == "Connection at 127.0.0.1:19092 closed"
    assert "Traceback" not in err
    assert "second line" not in err


@pytest.mark.usefixtures("restore_root_logging")
def test_debug_level_keeps_library_tracebacks(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("debug", summary_interval_s=3600.0)
    _log_library_exception()
    entry = orjson.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert "Traceback" in entry["exception"]


@pytest.mark.usefixtures("restore_root_logging")
def test_our_lines_name_the_module_that_wrote_them(capsys: pytest.CaptureFixture[str]) -> None:
    """A modstream logger's JSON line carries ``logger`` = its module, as library lines do."""
    configure_logging("info")
    get_logger("worker.consume").warning("consumer_paused", in_flight=3)
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    entry = orjson.loads(line)
    assert entry["logger"] == "worker.consume"
    assert entry["event"] == "consumer_paused"
    assert entry["in_flight"] == 3
