"""Dashboards and alerts in the box: what a platform team imports to watch spotgpu.

The Grafana dashboard (``dashboard.json``) and the Prometheus alert rules (``alerts.yaml``)
are package data over the metrics of :mod:`spotgpu.agent.telemetry` and
:mod:`spotgpu.controller.telemetry`; :mod:`spotgpu.observability.scrape` renders the
scrape config of a Prometheus server and of each cloud's own monitoring agent.
``spotgpu observability dashboard|alerts|scrape-config`` prints them.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

#: Scrape job names; the alert rules' ``up{job=...}`` read them.
AGENT_JOB = "spotgpu-agent"
CONTROLLER_JOB = "spotgpu-controller"


def dashboard_text() -> str:
    return resources.files(__package__).joinpath("dashboard.json").read_text(encoding="utf-8")


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(dashboard_text())
    return doc


def alerts_text() -> str:
    return resources.files(__package__).joinpath("alerts.yaml").read_text(encoding="utf-8")


def dashboard_expressions(doc: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """``[(panel title, PromQL)]`` of every dashboard target, in panel order."""
    doc = doc or dashboard()
    return [(p["title"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]
