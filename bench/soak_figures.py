"""The arithmetic of ``bench.soak``: a least-squares slope over the run and the soak's last line."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

__all__ = ["SoakFigures", "slope_per_hour", "soak_line"]

_S_PER_HOUR = 3600.0


def slope_per_hour(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(seconds, value)`` points, per hour; ``nan`` with fewer
    than two distinct times."""
    n = len(points)
    if n < 2:
        return math.nan
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return math.nan
    covariance = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return covariance / spread * _S_PER_HOUR


@dataclass(frozen=True, slots=True)
class SoakFigures:
    """Every field of the soak's last line, in its order (memory in MB)."""

    minutes: float
    rate_msgs_per_s: float
    rss_start_mb: float
    rss_end_mb: float
    rss_slope_mb_per_h: float
    fds_start: int
    fds_end: int
    tasks_start: int
    tasks_end: int
    produced: int
    verdicts: int

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_end_mb - self.rss_start_mb


def soak_line(figures: SoakFigures) -> str:
    """``name=value`` for every field plus ``rss_growth_mb``; floats with one decimal."""
    parts = []
    for f in fields(figures):
        value = getattr(figures, f.name)
        parts.append(f"{f.name}={value:.1f}" if isinstance(value, float) else f"{f.name}={value}")
    parts.append(f"rss_growth_mb={figures.rss_growth_mb:.1f}")
    return " ".join(parts)
