"""Values the worker's commands read from their command line: moments and model references.

- A moment (:func:`parse_moment`): a duration ago (``30d``; ``m``, ``h``, ``d``, ``w``) or an
  ISO-8601 instant, which must say its offset (``Z`` or ``+01:00``): a bare local time would mean
  different moments on different machines. ``modstream policy calibrate --since 30d`` and
  ``modstream rescan --since ... --until ...`` read their window with it.
- A model reference (:func:`parse_model_ref`): ``NAME`` or ``NAME:VERSION``
  (``moderation:1``); no version means the server's latest.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from worker.errors import WorkerError

__all__ = ["ArgumentError", "parse_model_ref", "parse_moment"]

_AGO = re.compile(r"^(?P<count>\d+)(?P<unit>[mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


_MODEL = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?::(?P<version>[0-9]+))?$")


class ArgumentError(WorkerError, ValueError):
    """A command-line value that cannot be read (the message says what was expected)."""


def parse_moment(text: str, now: datetime) -> datetime:
    """``text`` as a timezone-aware moment (``now`` minus a duration, or the instant itself)."""
    value = text.strip()
    match = _AGO.match(value)
    if match is not None:
        return now - timedelta(**{_UNITS[match["unit"]]: int(match["count"])})
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ArgumentError(
            f"{text!r}: expected a duration ago (30d, 12h, 90m, 2w) or an ISO-8601 instant"
        ) from exc
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ArgumentError(f"{text!r}: an instant needs its UTC offset (Z or +01:00)")
    return moment


def parse_model_ref(text: str) -> tuple[str, str]:
    """``NAME[:VERSION]`` as ``(name, version)``; the version is ``""`` when not given."""
    match = _MODEL.match(text.strip())
    if match is None:
        raise ArgumentError(f"{text!r}: expected NAME or NAME:VERSION, e.g. moderation:1")
    return match["name"], match["version"] or ""
