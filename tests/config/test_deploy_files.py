"""deploy/: the Grafana dashboard and the Prometheus rules name only metrics Baton serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.utils import timezone
from prometheus_client import REGISTRY

from workflows import exposition, metrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC = re.compile(r"\bbaton_[a-z_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


@pytest.fixture
def served(db) -> set[str]:
    """Every series name Baton's endpoints can serve."""
    names = {
        family.name + suffix
        for family in REGISTRY.collect()
        if family.name.startswith("baton_")
        for suffix in SUFFIXES[family.type]
    }
    now = timezone.now()
    for gauges in [exposition.engine_gauges, *metrics.scrape_gauges()]:
        names |= {name for name, *_ in gauges(now)}
    return names


def expressions_in_dashboard() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana" / "baton-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def alert_rules() -> list[dict]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "baton-alerts.yml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


class TestTheDashboard:
    def test_charts_only_metrics_baton_serves(self, served):
        expressions = expressions_in_dashboard()

        named = {name for expr in expressions for name in METRIC.findall(expr)}
        assert len(expressions) >= 15
        assert named <= served, named - served

    def test_charts_every_metric_baton_serves(self, served):
        named = {name for expr in expressions_in_dashboard() for name in METRIC.findall(expr)}

        bases = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in served}
        assert {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in named} == bases


class TestTheAlertRules:
    def test_cover_sweep_lag_dead_letters_and_overdue_tasks(self, served):
        rules = alert_rules()

        assert {rule["alert"] for rule in rules} >= {
            "BatonSweepLagging",
            "BatonDeadLetters",
            "BatonOverdueHumanTasks",
        }
        named = {name for rule in rules for name in METRIC.findall(rule["expr"])}
        assert named <= served, named - served
        assert all(rule["annotations"]["summary"] for rule in rules)
