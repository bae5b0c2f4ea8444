"""deploy/k8s/base/monitoring: the alert rules pass promtool's checks and unit tests, every alert
has a test that fires it and one that must not, and the dashboard's queries parse."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.promql_names import (
    ALERTS,
    DASHBOARD,
    adapter_expressions,
    alert_names,
    dashboard_expressions,
    recorded_names,
    rule_expressions,
    selector_names,
)

RULE_TESTS = ALERTS.with_name("alerts_test.yml")


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found: scripts/bootstrap.sh installs Debian's prometheus")
    return found


def _run(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [_promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_promtool_check_rules_accepts_the_rule_file() -> None:
    """``promtool check rules`` parses every rule and finds them all."""
    output = _run("check", "rules", ALERTS.name, cwd=ALERTS.parent)
    assert f"SUCCESS: {len(rule_expressions())} rules found" in output


def test_promtool_unit_tests_of_the_alerts_pass() -> None:
    """``promtool test rules alerts_test.yml``: every case fires exactly what it expects."""
    output = _run("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert "SUCCESS" in output


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    """No alert is left untested: each is expected to fire in some case and to stay quiet in
    another (a rule that always fires would pass a firing test alone)."""
    document = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    assert document["rule_files"] == [ALERTS.name]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in document["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    alerts = set(alert_names())
    assert alerts - fires == set(), "alerts without a firing test"
    assert alerts - quiet == set(), "alerts without a quiet test"
    assert (fires | quiet) - alerts == set(), "tests of alerts that do not exist"


def test_the_issue_list_of_alerts_is_there() -> None:
    """Lag growing, breaker open past 5 min, dead-letter spike, outbox backlog, review item
    past its target, online error rate."""
    assert {
        "ModstreamConsumerLagGrowing",
        "ModstreamInferenceBreakerOpen",
        "ModstreamDeadLetterSpike",
        "ModstreamVerdictOutboxBacklog",
        "ModstreamDecisionOutboxBacklog",
        "ModstreamReviewItemPastTarget",
        "ModstreamOnlineErrorRate",
    } <= set(alert_names())


def test_every_query_parses_and_names_its_metrics() -> None:
    """Each rule and dashboard expression is valid PromQL whose selectors all name a metric of
    ours (``modstream_``), Triton's (``nv_``) or a recording rule's."""
    recorded = recorded_names()
    expressions = {**rule_expressions(), **dashboard_expressions(), **adapter_expressions()}
    assert len(expressions) > 20
    for where, expression in expressions.items():
        names = selector_names(expression)
        assert names, where
        for name in names:
            assert name.startswith(("modstream_", "nv_")) or name in recorded, (where, name)


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    """Throughput, lag, batch size and latency histograms, produce-to-verdict latency, breaker
    state, dead letters, PostgreSQL write latency, Triton queue and compute time, online p99,
    review queue depth and oldest item: each has a query naming its metric."""
    shown = set().union(*(selector_names(e) for e in dashboard_expressions().values()))
    assert {
        "modstream_verdicts_total",
        "modstream_consumer_lag_records",
        "modstream_batch_size_items_bucket",
        "modstream_inference_seconds_bucket",
        "modstream_produce_to_verdict_seconds_bucket",
        "modstream_inference_replica_breaker_state",
        "modstream_dead_letters_total",
        "modstream_sink_seconds_bucket",
        "nv_inference_queue_duration_us",
        "nv_inference_compute_infer_duration_us",
        "modstream_online_call_seconds_bucket",
        "modstream_review_queue_items",
        "modstream_review_queue_oldest_item_age_seconds",
    } <= shown
    assert DASHBOARD.is_file()


def test_the_adapter_rule_reads_tritons_queue_and_request_counters() -> None:
    """The prometheus-adapter rule behind the Triton HPA divides Triton's queue time by its
    successful requests, with the templates filled in as the adapter does."""
    queries = adapter_expressions()
    assert "<<" not in "".join(queries.values())
    metrics = queries["adapter triton_queue_seconds_per_request / metricsQuery"]
    assert selector_names(metrics) == {
        "nv_inference_queue_duration_us",
        "nv_inference_request_success",
    }


def test_a_selector_without_a_metric_name_is_refused() -> None:
    """The name extraction fails loudly rather than skip a query it cannot attribute."""
    with pytest.raises(ValueError, match="without a metric name"):
        selector_names('sum(rate({job="modstream-worker"}[5m]))')
    assert selector_names('rate({__name__="modstream_records_total"}[1m])') == {
        "modstream_records_total"
    }
