"""The metric names the monitoring files ask for, and the names a scrape offers.

``deploy/k8s/base/monitoring`` holds the alert rules (``alerts.yml``) and the Grafana dashboard
(``dashboard.json``). Their PromQL is parsed with a real PromQL parser (``promql-parser``), so a
name is a selector's metric name, never a function, a label or a word in a string; names made
by a recording rule of ``alerts.yml`` are the rules' own and need no exporter.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from prometheus_client.parser import text_string_to_metric_families

from common.settings import project_root

__all__ = [
    "ADAPTER_RULES",
    "ALERTS",
    "DASHBOARD",
    "adapter_expressions",
    "alert_names",
    "dashboard_expressions",
    "exported_names",
    "recorded_names",
    "rule_expressions",
    "selector_names",
]

MONITORING = project_root() / "deploy" / "k8s" / "base" / "monitoring"
ALERTS = MONITORING / "alerts.yml"
DASHBOARD = MONITORING / "dashboard.json"
ADAPTER_RULES = MONITORING / "prometheus-adapter-rules.yaml"
_ADAPTER_TEMPLATES = {
    "<<.LabelMatchers>>": 'namespace="modstream",pod="triton-0"',
    "<<.GroupBy>>": "pod",
}
"""What prometheus-adapter puts in its query templates for one pod."""

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("_count", "_sum", "_created"),
    "info": ("_info",),
}


def _rules(path: Path) -> Iterator[dict[str, Any]]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    for group in document["groups"]:
        yield from group["rules"]


def rule_expressions(path: Path = ALERTS) -> dict[str, str]:
    """Each rule's name (``alert`` or ``record``) and its expression."""
    return {rule.get("alert") or rule["record"]: str(rule["expr"]) for rule in _rules(path)}


def alert_names(path: Path = ALERTS) -> list[str]:
    return [rule["alert"] for rule in _rules(path) if "alert" in rule]


def recorded_names(path: Path = ALERTS) -> set[str]:
    """The series the recording rules of ``path`` make."""
    return {rule["record"] for rule in _rules(path) if "record" in rule}


def dashboard_expressions(path: Path = DASHBOARD) -> dict[str, str]:
    """``"panel title / refId"`` and the PromQL of every target of every panel."""
    document = json.loads(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}

    def visit(panels: Iterable[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                found[f"{panel['title']} / {target['refId']}"] = target["expr"]
            visit(panel.get("panels", []))

    visit(document["panels"])
    return found


def adapter_expressions(path: Path = ADAPTER_RULES) -> dict[str, str]:
    """Each prometheus-adapter rule's series query and metrics query, templates filled in as
    the adapter fills them for one pod."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for rule in document["rules"]:
        name = rule["name"]["as"]
        query = str(rule["metricsQuery"])
        for template, value in _ADAPTER_TEMPLATES.items():
            query = query.replace(template, value)
        found[f"adapter {name} / seriesQuery"] = str(rule["seriesQuery"])
        found[f"adapter {name} / metricsQuery"] = query
    return found


def selector_names(expression: str) -> set[str]:
    """The metric names the vector selectors of ``expression`` select (``ValueError`` when it
    does not parse, or when a selector names no metric: every query here names its metric)."""
    names: set[str] = set()
    unnamed: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name or next(
                (m.value for m in node.matchers.matchers if m.name == "__name__"), None
            )
            if name is None:
                unnamed.append(str(node))
            else:
                names.add(name)

    promql_parser.walk(promql_parser.parse(expression), visit)
    if unnamed:
        raise ValueError(f"selectors without a metric name in {expression!r}: {unnamed}")
    return names


def exported_names(exposition: str) -> set[str]:
    """Every series name a Prometheus text exposition offers, samples or not yet: a family
    declared with ``# TYPE`` offers its type's suffixed names (``_total``, ``_bucket`` ...)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names.add(family.name)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names
