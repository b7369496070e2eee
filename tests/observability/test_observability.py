"""The shipped dashboard and alert rules: valid for the real promtool, and about metrics that exist."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from spotgpu.agent.config import AgentConfig, AgentRuntime
from spotgpu.agent.telemetry import AgentTelemetry
from spotgpu.catalogue import CLOUDS
from spotgpu.contract.agent_records import Identity
from spotgpu.contract.sources import EXPECTED_DROPS, DropReason
from spotgpu.controller.telemetry import ControllerTelemetry
from spotgpu.models.ladder import StepKind
from spotgpu.observability import alerts_text, dashboard, dashboard_expressions
from spotgpu.observability.scrape import AGENT_HOST, AGENT_PORT, agent_files

PROMTOOL = shutil.which("promtool")
#: promtool is Debian's prometheus package; only where apt-get cannot install it may these skip.
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and not os.path.exists("/usr/bin/apt-get"),
    reason="no promtool and no apt-get to install Debian's prometheus package (./run test does)",
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "promtool is missing: ./run test installs Debian's prometheus package"
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


def series_names() -> set[str]:
    """Every sample name the agent's and the controller's registries expose."""
    names: set[str] = set()
    for registry in (AgentTelemetry(None).registry, ControllerTelemetry().registry):
        for family in registry.collect():
            names.add(family.name)
            names |= {family.name + suffix for suffix in ("_total", "_bucket", "_count", "_sum", "_created", "_info")}
    return names


def referenced(expr: str) -> set[str]:
    return set(re.findall(r"\bspotgpu_[a-z_]+", expr))


def series_labels() -> dict[str, set[str]]:
    """Every sample name the registries expose -> the labels its samples carry, a scrape's own included.

    prometheus_client keeps a metric's label names in ``_labelnames`` (no public accessor); an Info
    metric's labels are its value's keys, the VM identity's (``contract.agent_records.Identity``).
    """
    labels: dict[str, set[str]] = {}
    for telemetry in (AgentTelemetry(None), ControllerTelemetry()):
        for metric in vars(telemetry).values():
            if not isinstance(metric, MetricWrapperBase):
                continue
            name, kind = next(iter(metric.describe())).name, metric._type
            own = {"instance", "job", *metric._labelnames}
            if kind == "info":
                labels[name + "_info"] = own | {f.name for f in dataclasses.fields(Identity)}
            for suffix in ("", "_total", "_count", "_sum", "_created"):
                labels[name + suffix] = own
            if kind == "histogram":
                labels[name + "_bucket"] = own | {"le"}
    return labels


def grouped_by(expr: str) -> set[str]:
    """The labels an expression's ``by (...)``, ``on (...)`` and ``group_left (...)`` clauses name."""
    return {label.strip() for clause in re.findall(r"\b(?:by|on|group_left)\s*\(([^)]*)\)", expr)
            for label in clause.split(",") if label.strip()}  # fmt: skip


@needs_promtool
def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    rules = tmp_path / "alerts.yaml"
    rules.write_text(alerts_text())
    run = promtool("check", "rules", str(rules))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS: 15 rules found" in run.stdout


@needs_promtool
def test_promtool_parses_every_dashboard_expression(tmp_path: Path) -> None:
    """Each expression, its Grafana variables resolved, as a recording rule: promtool parses it."""
    group = {"name": "dashboard", "rules": [
        {"record": f"spotgpu:panel_{i}", "expr": expr.replace("$pool", ".*").replace("$__range", "10m")}
        for i, (_, expr) in enumerate(dashboard_expressions())
    ]}  # fmt: skip
    (tmp_path / "panels.yaml").write_text(yaml.safe_dump({"groups": [group]}))
    run = promtool("check", "rules", str(tmp_path / "panels.yaml"))
    assert run.returncode == 0, run.stdout + run.stderr


@needs_promtool
@pytest.mark.parametrize("cloud", ["aws", "prometheus"])
def test_promtool_checks_the_scrape_configs(tmp_path: Path, cloud: str) -> None:
    if cloud == "aws":  # the CloudWatch agent reads a Prometheus config file
        text = next(c for p, c in agent_files("aws", "pool-a").items() if p.endswith("prometheus.yaml"))
    else:
        text = subprocess.run([sys.executable, "-m", "spotgpu", "observability", "scrape-config"],
                              capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    (tmp_path / "prometheus.yml").write_text(text)
    run = promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert run.returncode == 0, run.stdout + run.stderr


def test_dashboard_and_alerts_name_only_metrics_that_exist() -> None:
    known = series_names()
    exprs = [expr for _, expr in dashboard_expressions()]
    exprs += [rule["expr"] for group in yaml.safe_load(alerts_text())["groups"] for rule in group["rules"]]
    unknown = sorted({name for expr in exprs for name in referenced(expr)} - known)
    assert unknown == []


def test_dashboard_and_alerts_group_only_by_labels_their_metrics_carry() -> None:
    """A panel ``sum by (pool, source, reason)`` over a counter without ``source`` draws one bar per pool,
    silently; an alert over it fires without the label its summary names."""
    labels = series_labels()
    exprs = [(title, expr) for title, expr in dashboard_expressions()]
    exprs += [(rule["alert"], rule["expr"]) for group in yaml.safe_load(alerts_text())["groups"] for rule in group["rules"]]
    wrong = []
    for where, expr in exprs:
        carried = set().union(*(labels[name] for name in referenced(expr)))
        if grouped_by(expr) - carried:
            wrong.append(f"{where}: {sorted(grouped_by(expr) - carried)} not on {sorted(referenced(expr))}")
    assert wrong == []


def test_dropped_events_panel_and_alert_read_the_controllers_counter() -> None:
    """Issue 36: the counter of dropped controller events has a panel and an alert, by its exported name."""
    counter = ControllerTelemetry().events_dropped
    exported = next(iter(counter.describe())).name + "_total"  # a Counter's samples: the name given it, plus _total
    [panel] = [expr for title, expr in dashboard_expressions() if title == "Controller events dropped"]
    rule = next(r for g in yaml.safe_load(alerts_text())["groups"] for r in g["rules"]
                if r["alert"] == "SpotgpuControllerEventsDropped")  # fmt: skip
    for expr in (panel, rule["expr"]):
        assert referenced(expr) == {exported}
        assert grouped_by(expr) == set(counter._labelnames)  # by pool, source and reason, as counted


def test_dropped_events_alert_ignores_exactly_the_expected_drops() -> None:
    """The alert's reason filter is the contract's set of drops that are the sources working as designed."""
    rule = next(r for g in yaml.safe_load(alerts_text())["groups"] for r in g["rules"]
                if r["alert"] == "SpotgpuControllerEventsDropped")  # fmt: skip
    [ignored] = re.findall(r'reason!~"([^"]*)"', rule["expr"])
    assert set(ignored.split("|")) == {reason.value for reason in EXPECTED_DROPS}
    assert set(DropReason) > EXPECTED_DROPS  # some drops do alert


def test_dashboard_covers_what_issue_25_asks_for() -> None:
    titles = " | ".join(title for title, _ in dashboard_expressions()).lower()
    for topic in ("notice lead time", "final checkpoint outcomes", "reacquisition latency", "apart from quota",
                  "time on each rung", "deadline at risk", "progress unreported", "controller events dropped"):  # fmt: skip
        assert topic in titles, topic
    doc = dashboard()
    assert doc["uid"] == "spotgpu-overview" and {v["name"] for v in doc["templating"]["list"]} == {"datasource", "pool"}


def test_the_on_demand_alert_uses_the_ladders_rank() -> None:
    rule = next(r for g in yaml.safe_load(alerts_text())["groups"] for r in g["rules"] if r["alert"] == "SpotgpuOnDemandRung")
    assert rule["expr"].endswith(f">= {StepKind.ON_DEMAND.rank}")


def test_scrape_defaults_are_the_agents_own() -> None:
    assert AgentConfig.model_fields["telemetry_port"].default == AGENT_PORT
    assert AgentRuntime.model_fields["telemetry_host"].default == AGENT_HOST


@pytest.mark.parametrize("cloud", CLOUDS)
def test_cloud_agent_files_scrape_the_agent_endpoint(cloud: str) -> None:
    files = agent_files(cloud, "pool-a")  # type: ignore[arg-type]
    assert files and all(path.startswith("/") for path in files)
    text = "\n".join(files.values())
    assert f"{AGENT_HOST}:{AGENT_PORT}" in text
    for path, content in files.items():
        if path.endswith(".json"):
            json.loads(content)
        elif path.endswith(".yaml"):
            assert yaml.safe_load(content)


@pytest.mark.parametrize("what", ["dashboard", "alerts", "scrape-config --cloud gcp --pool train-gcp"])
def test_the_command_prints_the_shipped_files(what: str) -> None:
    run = subprocess.run([sys.executable, "-m", "spotgpu", "observability", *what.split(), "--json"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    if what == "dashboard":
        assert doc == dashboard()
    elif what == "alerts":
        assert doc == yaml.safe_load(alerts_text())
    else:
        assert list(doc["files"]) == ["/etc/google-cloud-ops-agent/config.yaml"]


def _annotations(alert: str, labels: dict[str, str]) -> dict[str, str]:
    """The rule's annotations with ``{{ $labels.x }}`` filled in, as Prometheus renders them."""
    rule = next(r for g in yaml.safe_load(alerts_text())["groups"] for r in g["rules"] if r["alert"] == alert)
    return {k: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], v) for k, v in rule["annotations"].items()}


#: (alert, input series {series: values}, eval time, the alert's labels or None for "does not fire")
ALERT_CASES = [
    # a VM's counter appears already at 1 (its one notice): the alert must still fire
    ("SpotgpuFinalCheckpointFailed", {'spotgpu_agent_final_checkpoints_total{instance="vm-1",job="spotgpu-agent",outcome="failed"}': "_ _ 1 1 1"},
     "4m", {"instance": "vm-1", "outcome": "failed", "severity": "warning"}),
    ("SpotgpuFinalCheckpointFailed", {'spotgpu_agent_final_checkpoints_total{instance="vm-1",job="spotgpu-agent",outcome="committed"}': "_ 1 1 1"},
     "3m", None),
    ("SpotgpuDeadlineAtRisk", {'spotgpu_deadline_at_risk{pool="train-aws",job="spotgpu-controller",instance="c:9108"}': "0 1 1 1 1 1 1 1"},
     "7m", {"pool": "train-aws", "severity": "critical"}),
    ("SpotgpuQuotaLaunchFailures", {'spotgpu_launch_failures_total{pool="p",group="g",reason="quota",job="spotgpu-controller",instance="c:9108"}': "0 0 1 1"},
     "3m", {"pool": "p", "group": "g", "severity": "warning"}),
    ("SpotgpuQuotaLaunchFailures", {'spotgpu_launch_failures_total{pool="p",group="g",reason="capacity",job="spotgpu-controller",instance="c:9108"}': "0 0 9 9"},
     "3m", None),
    # issue 36: one unreadable message a minute for 45 minutes: a sustained rate, labelled as counted
    ("SpotgpuControllerEventsDropped", {'spotgpu_controller_events_dropped_total{pool="p",source="sqs",reason="unknown-shape",job="spotgpu-controller",instance="c:9108"}': "0+1x60"},
     "45m", {"pool": "p", "source": "sqs", "reason": "unknown-shape", "severity": "warning"}),
    # one burst of unreadable messages at 2m, then none: the rate stays nonzero until 17m, not for 30m
    ("SpotgpuControllerEventsDropped", {'spotgpu_controller_events_dropped_total{pool="p",source="pubsub",reason="malformed",job="spotgpu-controller",instance="c:9108"}': "0 0 5x60"},
     "16m", None),
    # another pool's VMs on an account-wide rule, all day: the sources working, never an alert
    ("SpotgpuControllerEventsDropped", {'spotgpu_controller_events_dropped_total{pool="p",source="sqs",reason="other-pool",job="spotgpu-controller",instance="c:9108"}': "0+1x60"},
     "45m", None),
]  # fmt: skip


@needs_promtool
def test_promtool_unit_tests_the_alerts(tmp_path: Path) -> None:
    (tmp_path / "alerts.yaml").write_text(alerts_text())
    tests = []
    for alert, series, at, labels in ALERT_CASES:
        expected = [] if labels is None else [{"exp_labels": labels, "exp_annotations": _annotations(alert, labels)}]
        tests.append({
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": expected}],
        })  # fmt: skip
    (tmp_path / "alerts_test.yaml").write_text(yaml.safe_dump({"rule_files": ["alerts.yaml"], "tests": tests}))
    run = subprocess.run([PROMTOOL or "promtool", "test", "rules", str(tmp_path / "alerts_test.yaml")],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
