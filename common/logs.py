"""Logging configured once: every log line is JSON on stderr, and an outage cannot flood it.

``structlog`` renders our own events, each with ``logger`` naming the module that wrote it
(:func:`get_logger`); the standard library's loggers (aiokafka, asyncio, uvicorn, grpc) go
through the same processors via :class:`structlog.stdlib.ProcessorFormatter`, so their lines are
JSON too (``logger`` names the source, ``event`` holds their text). Their text never
carries chat message text: those libraries log connection state, not payloads. An exception a
library logs is summarised as ``exception_type`` and a one-line ``exception`` (at most
200 characters), not a traceback: a driver's traceback can quote a query's parameters, and a
connection dropped during shutdown is not worth thirty lines. At ``debug`` level the full
traceback is kept. Our own code logs the type and place of an error explicitly.

A library that fails to connect logs the same line many times a second. :class:`RepeatSummary`
lets the first line of each (logger, template) pass, drops repeats for ``interval_s`` and
stamps the next line that passes with ``repeated`` (how many were dropped in between), so an
outage costs one line per interval per kind of error.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TextIO

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["RepeatSummary", "configure_logging", "get_logger"]

SUMMARY_INTERVAL_S = 30.0
"""Repeats of one library log line within this window are counted, not printed."""


def _dumps(obj: object, default: object = None) -> str:
    return orjson.dumps(obj, default=str).decode()


class RepeatSummary(logging.Filter):
    """Pass the first record of each (logger, template) per interval; count the rest."""

    def __init__(
        self, interval_s: float = SUMMARY_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._clock = clock
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = self._clock()
        opened, dropped = self._windows.get(key, (-1e18, 0))
        if now - opened < self._interval_s:
            self._windows[key] = (opened, dropped + 1)
            return False
        if len(self._windows) > 10_000:  # unbounded templates must not grow memory
            self._windows.clear()
        self._windows[key] = (now, 0)
        if dropped:
            record.repeated = dropped
        return True


def _add_repeated(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    record = event.get("_record")
    repeated = getattr(record, "repeated", None) if record is not None else None
    if repeated:
        event["repeated"] = repeated
    return event


_EXCEPTION_CHARS = 200


def _summarise_exception(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Replace a library record's ``exc_info`` by its type and first line (module docstring)."""
    exc_info = event.pop("exc_info", None)
    if exc_info is True:
        exc_info = sys.exc_info()
    error = exc_info[1] if isinstance(exc_info, tuple) else exc_info
    if isinstance(error, BaseException):
        event["exception_type"] = type(error).__name__
        lines = str(error).splitlines()
        event["exception"] = (lines[0] if lines else "")[:_EXCEPTION_CHARS]
    return event


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure_logging(
    level: str = "info", *, summary_interval_s: float = SUMMARY_INTERVAL_S
) -> None:
    """Route structlog and the standard library's loggers to JSON lines on stderr."""
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                _add_repeated,
                *_shared_processors(),
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                (
                    structlog.processors.format_exc_info
                    if numeric <= logging.DEBUG
                    else _summarise_exception
                ),
                structlog.processors.JSONRenderer(serializer=_dumps),
            ],
        )
    )
    handler.addFilter(RepeatSummary(summary_interval_s))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    # Libraries speak at WARNING and above unless asked for more; their INFO is chatty.
    root.setLevel(max(numeric, logging.WARNING))
    structlog.configure(
        processors=[
            _add_module,
            *_shared_processors(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_ModuleLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


class _ModuleLogger(structlog.PrintLogger):
    """A print logger that knows which module it belongs to."""

    def __init__(self, file: TextIO, name: str | None) -> None:
        super().__init__(file)
        self.name = name


class _ModuleLoggerFactory:
    """Makes each module's logger; the module name is ``get_logger``'s argument
    (``structlog.PrintLoggerFactory`` would drop it)."""

    def __init__(self, file: TextIO) -> None:
        self._file = file

    def __call__(self, *args: object) -> _ModuleLogger:
        return _ModuleLogger(self._file, str(args[0]) if args else None)


def _add_module(logger: WrappedLogger, _: str, event: EventDict) -> EventDict:
    """``logger`` = the module that wrote the line, the key library lines name theirs in."""
    name = getattr(logger, "name", None)
    if name and "logger" not in event:
        event["logger"] = name
    return event


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """The logger of module ``name``: each of its lines carries ``logger`` = ``name``."""
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
