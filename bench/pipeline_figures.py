"""The arithmetic of ``bench.pipeline``: ratios, quantiles from a Prometheus histogram, the line.

Kept apart from the runs so that it can be tested without a stack. A figure that could not be
measured is ``nan`` and prints as ``nan``; the last line always has every field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

__all__ = [
    "PipelineFigures",
    "histogram_buckets",
    "histogram_mean",
    "histogram_quantile",
    "ratio",
    "summary_line",
]

NAN = float("nan")

_BUCKET_LINE = re.compile(
    r'^(?P<name>[a-zA-Z_:][\w:]*)_bucket\{le="(?P<le>[^"]+)"\} (?P<count>\S+)$'
)


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, ``nan`` when either is ``nan`` or the denominator is 0."""
    if math.isnan(numerator) or math.isnan(denominator) or denominator == 0:
        return NAN
    return numerator / denominator


def histogram_buckets(exposition: str, name: str) -> list[tuple[float, float]]:
    """The cumulative ``(upper bound, count)`` pairs of an unlabelled histogram ``name`` in a
    Prometheus text exposition, sorted by bound (``+Inf`` last)."""
    buckets: list[tuple[float, float]] = []
    for line in exposition.splitlines():
        match = _BUCKET_LINE.match(line.strip())
        if match is None or match["name"] != name:
            continue
        buckets.append((float(match["le"]), float(match["count"])))
    return sorted(buckets)


def _sample(exposition: str, series: str) -> float:
    for line in exposition.splitlines():
        name, _, value = line.strip().partition(" ")
        if name == series:
            return float(value)
    return NAN


def histogram_mean(exposition: str, name: str) -> float:
    """``sum / count`` of an unlabelled histogram ``name``; ``nan`` without observations."""
    return ratio(_sample(exposition, f"{name}_sum"), _sample(exposition, f"{name}_count"))


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """The ``q``-quantile of cumulative buckets, interpolated linearly inside the bucket that
    holds it (Prometheus' ``histogram_quantile``); ``nan`` when there are no observations.

    A quantile in the ``+Inf`` bucket is reported as the largest finite bound.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError("q must lie in [0, 1]")
    if not buckets or buckets[-1][1] <= 0:
        return NAN
    total = buckets[-1][1]
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return lower_bound


@dataclass(frozen=True, slots=True)
class PipelineFigures:
    """Every field of the last line, in its order."""

    e2e_msgs_per_s: float = NAN
    ceiling_msgs_per_s: float = NAN
    ratio_ceiling: float = NAN
    fixture_e2e_msgs_per_s: float = NAN
    fixture_ceiling_msgs_per_s: float = NAN
    fixture_ratio_ceiling: float = NAN
    p99_ms_fixture: float = NAN
    cpu_model_speedup: float = NAN
    inprocess_e2e_msgs_per_s: float = NAN
    """The real models' (a) with ``inference.backend = inprocess`` (no Triton)."""
    ratio_inprocess_triton: float = NAN
    """``inprocess_e2e_msgs_per_s`` over ``e2e_msgs_per_s``: both measured in this run."""
    fixture_inprocess_e2e_msgs_per_s: float = NAN


_DECIMALS = {
    "ratio_ceiling": 3,
    "fixture_ratio_ceiling": 3,
    "cpu_model_speedup": 2,
    "ratio_inprocess_triton": 3,
}


def _number(value: float, decimals: int) -> str:
    return "nan" if math.isnan(value) else f"{value:.{decimals}f}"


def summary_line(figures: PipelineFigures) -> str:
    """``name=value`` for every field, space-separated; rates and milliseconds with one decimal,
    ratios with three, the speedup with two."""
    return " ".join(
        f"{f.name}={_number(getattr(figures, f.name), _DECIMALS.get(f.name, 1))}"
        for f in fields(figures)
    )
