"""deploy/k8s/base/monitoring: the alert rules pass promtool's checks and unit tests, every alert
has a test that fires it and one that must not, the absence alerts watch a series only their
own tier exports from start-up, and the dashboard's queries parse and show what they watch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import promql_parser
import pytest
import yaml
from prometheus_client import CollectorRegistry

from engine.metrics import Metrics
from online.metrics import MethodCalls, OnlineMetrics
from review.metrics import ReviewMetrics
from review.queue import QUEUES
from review.schemas import APPEALS_QUEUE, QueueDepth
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


def test_overdue_appeals_alert_reads_the_appeals_series_the_review_service_exports() -> None:
    """ModstreamAppealsOverdue selects modstream_review_queue_overdue_items by an exact
    ``queue="appeals"`` matcher (the other queues have their own alert), and the review
    service exports that very series once it has read the queues."""
    expression = rule_expressions()["ModstreamAppealsOverdue"]
    selectors: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            selectors.append(node)

    promql_parser.walk(promql_parser.parse(expression), visit)
    (selector,) = selectors
    assert selector.name == "modstream_review_queue_overdue_items"
    (matcher,) = selector.matchers.matchers
    assert (matcher.name, matcher.value) == ("queue", APPEALS_QUEUE)
    assert matcher.op == promql_parser.MatchOp.Equal

    review = ReviewMetrics()
    review.observe_queues(
        [QueueDepth(queue=q, open=0, claimed=0, oldest_age_s=0.0, overdue=0) for q in QUEUES],
        {},
    )
    exported = {
        sample.labels.get("queue")
        for family in review.registry.collect()
        for sample in family.samples
        if sample.name == selector.name
    }
    assert APPEALS_QUEUE in exported


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


ABSENCE_ALERTS = {
    "ModstreamWorkersAbsent": "worker",
    "ModstreamOnlineAbsent": "online",
    "ModstreamReviewAbsent": "review",
    "ModstreamTritonAbsent": "triton",
}
"""The alert that fires when a whole tier is gone, and the tier."""
WORST_CASE_ALERTS = {
    "ModstreamRulesReloadRejected": "modstream_rules_reloads_total",
    "ModstreamPolicyReloadRejected": "modstream_policy_reloads_total",
    "ModstreamShadowDropping": "modstream_shadow_dropped_total",
    "ModstreamRollupsStale": "modstream_rollups_refreshed_timestamp_seconds",
}
"""Alerts on what fails quietly, and the metric each reads."""


def _absent_selector(expression: str) -> str:
    """The metric name of ``absent(<selector>)``; fails on any other shape."""
    node = promql_parser.parse(expression)
    assert isinstance(node, promql_parser.Call), expression
    assert node.func.name == "absent", expression
    (argument,) = node.args
    assert isinstance(argument, promql_parser.VectorSelector), expression
    assert argument.name, expression
    return str(argument.name)


def _series(registry: CollectorRegistry) -> set[str]:
    """The names of the samples a scrape of ``registry`` returns now (a family declared
    without samples offers no series, and absent() sees none)."""
    return {sample.name for family in registry.collect() for sample in family.samples}


def _tiers_at_start() -> dict[str, set[str]]:
    """What each modstream tier exports once started and before any work: the worker once it
    holds a partition (its lag probe sets the partition's series), the online service with
    its methods bound (the daemon's metrics on the same registry, as it runs them), the
    review service as built."""
    worker = Metrics(CollectorRegistry())
    worker.consumer_lag_records.labels("chat.messages", "0").set(0)
    online = Metrics(CollectorRegistry())
    MethodCalls(OnlineMetrics(online.registry), "CheckMessage")
    review = ReviewMetrics()
    return {
        "worker": _series(worker.registry),
        "online": _series(online.registry),
        "review": _series(review.registry),
    }


def test_a_whole_tier_gone_has_an_absence_alert() -> None:
    """The worker, the online service, the review service and Triton each have an alert that
    is ``absent()`` of one named series, critical or warning, held for a few minutes."""
    expressions = rule_expressions()
    rules = {
        rule["alert"]: rule
        for group in yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    for alert in ABSENCE_ALERTS:
        assert alert in expressions, alert
        _absent_selector(expressions[alert])
        assert rules[alert]["labels"]["severity"] in ("critical", "warning")
        assert rules[alert]["for"] == "5m"


def test_each_absence_alert_watches_a_series_only_its_tier_exports_from_start() -> None:
    """A modstream tier's absence series is in that tier's exposition from start-up (an idle
    pod keeps the alert quiet) and in no other tier's (the online service runs the daemon's
    metrics too, so a worker series it also exports would hide every worker gone); Triton's
    is its own ``nv_`` request counter."""
    tiers = _tiers_at_start()
    expressions = rule_expressions()
    for alert, tier in ABSENCE_ALERTS.items():
        name = _absent_selector(expressions[alert])
        if tier == "triton":
            assert name.startswith("nv_inference_"), alert
            continue
        assert name in tiers[tier], (alert, name)
        others = {t for t, names in tiers.items() if t != tier and name in names}
        assert others == set(), (alert, name, others)


def test_what_fails_quietly_has_an_alert_on_the_metric_that_counts_it() -> None:
    """Rejected rule and policy reloads, dropped shadow work and stale rollups each have an
    alert reading the metric the code exports for it."""
    expressions = rule_expressions()
    exported = set().union(*_tiers_at_start().values())
    for alert, metric in WORST_CASE_ALERTS.items():
        assert metric in selector_names(expressions[alert]), alert
        assert metric in exported, metric


def test_the_dashboard_shows_what_the_new_alerts_watch() -> None:
    """A panel per tier's absence series, the replicas each client uses, the reload results,
    the shadow's drops and the rollups' age."""
    shown = set().union(*(selector_names(e) for e in dashboard_expressions().values()))
    expressions = rule_expressions()
    watched = {_absent_selector(expressions[alert]) for alert in ABSENCE_ALERTS}
    assert watched | set(WORST_CASE_ALERTS.values()) | {"modstream_inference_replicas"} <= shown
