"""Tests for bench.pipeline_figures: ratios, histogram quantiles and the bench's last line."""

from __future__ import annotations

import math

import pytest

from bench.pipeline_figures import (
    NAN,
    PipelineFigures,
    histogram_buckets,
    histogram_mean,
    histogram_quantile,
    ratio,
    summary_line,
)

EXPOSITION = """\
# HELP modstream_produce_to_verdict_seconds From the record's timestamp to its verdict.
# TYPE modstream_produce_to_verdict_seconds histogram
modstream_produce_to_verdict_seconds_bucket{le="0.1"} 10.0
modstream_produce_to_verdict_seconds_bucket{le="0.05"} 0.0
modstream_produce_to_verdict_seconds_bucket{le="0.2"} 90.0
modstream_produce_to_verdict_seconds_bucket{le="+Inf"} 100.0
modstream_produce_to_verdict_seconds_count 100.0
modstream_produce_to_verdict_seconds_sum 12.5
modstream_end_to_end_seconds_bucket{le="0.1"} 3.0
"""


def test_ratio_divides_and_gives_nan_when_undefined() -> None:
    """A ratio is a plain quotient, and nan for a zero or missing denominator or numerator."""
    assert ratio(3.0, 4.0) == 0.75
    assert math.isnan(ratio(1.0, 0.0))
    assert math.isnan(ratio(NAN, 2.0))
    assert math.isnan(ratio(2.0, NAN))


def test_histogram_buckets_reads_only_the_named_histogram_sorted() -> None:
    """Bucket lines of the named histogram are parsed and sorted by bound, +Inf last."""
    buckets = histogram_buckets(EXPOSITION, "modstream_produce_to_verdict_seconds")
    assert buckets == [(0.05, 0.0), (0.1, 10.0), (0.2, 90.0), (math.inf, 100.0)]


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    """The median of 80 observations in (0.1, 0.2] after 10 below 0.1 lies at 0.15."""
    buckets = histogram_buckets(EXPOSITION, "modstream_produce_to_verdict_seconds")
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.05, buckets) == pytest.approx(0.075)


def test_histogram_quantile_in_the_inf_bucket_is_the_largest_bound() -> None:
    """A quantile beyond the last finite bound is reported as that bound, not infinity."""
    buckets = histogram_buckets(EXPOSITION, "modstream_produce_to_verdict_seconds")
    assert histogram_quantile(0.99, buckets) == 0.2


def test_histogram_quantile_without_observations_is_nan() -> None:
    """No buckets, or only empty ones, give nan; q outside [0, 1] is refused."""
    assert math.isnan(histogram_quantile(0.5, []))
    assert math.isnan(histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]))
    with pytest.raises(ValueError, match="q must"):
        histogram_quantile(1.5, [(math.inf, 1.0)])


def test_summary_line_has_every_field_in_order() -> None:
    """The last line names every field in the agreed order, with nan where unmeasured."""
    line = summary_line(
        PipelineFigures(
            e2e_msgs_per_s=64.26,
            ceiling_msgs_per_s=61.44,
            ratio_ceiling=1.04588,
            fixture_e2e_msgs_per_s=9000.04,
            fixture_ceiling_msgs_per_s=16000.0,
            fixture_ratio_ceiling=0.5625,
            p99_ms_fixture=180.26,
        )
    )
    assert line == (
        "e2e_msgs_per_s=64.3 ceiling_msgs_per_s=61.4 ratio_ceiling=1.046 "
        "fixture_e2e_msgs_per_s=9000.0 fixture_ceiling_msgs_per_s=16000.0 "
        "fixture_ratio_ceiling=0.562 p99_ms_fixture=180.3 cpu_model_speedup=nan "
        "inprocess_e2e_msgs_per_s=nan ratio_inprocess_triton=nan "
        "fixture_inprocess_e2e_msgs_per_s=nan"
    )


def test_summary_line_of_nothing_measured_is_all_nan() -> None:
    """With nothing measured every field is still printed, each as nan."""
    names = [part.split("=")[0] for part in summary_line(PipelineFigures()).split()]
    values = {part.split("=")[1] for part in summary_line(PipelineFigures()).split()}
    assert names == [
        "e2e_msgs_per_s",
        "ceiling_msgs_per_s",
        "ratio_ceiling",
        "fixture_e2e_msgs_per_s",
        "fixture_ceiling_msgs_per_s",
        "fixture_ratio_ceiling",
        "p99_ms_fixture",
        "cpu_model_speedup",
        "inprocess_e2e_msgs_per_s",
        "ratio_inprocess_triton",
        "fixture_inprocess_e2e_msgs_per_s",
    ]
    assert values == {"nan"}


def test_histogram_mean_is_sum_over_count() -> None:
    """The mean of a histogram is its _sum over its _count; nan when it is absent."""
    assert histogram_mean(EXPOSITION, "modstream_produce_to_verdict_seconds") == 0.125
    assert math.isnan(histogram_mean(EXPOSITION, "modstream_sink_seconds"))
