"""structlog configured once: JSON lines rendered by orjson, no message text by default."""

from __future__ import annotations

import logging
import sys

import orjson
import structlog

__all__ = ["configure_logging", "get_logger"]


def _dumps(obj: object, default: object = None) -> str:
    return orjson.dumps(obj, default=str).decode()


def configure_logging(level: str = "info") -> None:
    """Route structlog and the standard library's loggers to JSON on stderr."""
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    logging.basicConfig(
        stream=sys.stderr, level=max(numeric, logging.WARNING), format="%(message)s"
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
