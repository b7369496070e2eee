"""Scrape configs: a Prometheus server's, and each cloud's own monitoring agent's.

The agent's endpoint binds ``runtime.telemetryHost`` (default 127.0.0.1) on
``telemetryPort`` (default 9464) of ``/etc/spotgpu/agent.json``: loopback, so only an
agent on the VM itself can read it. On each cloud that agent is the cloud's own:

- AWS: the CloudWatch agent's Prometheus support (``logs.metrics_collected.prometheus``),
  which sends the series to CloudWatch as embedded-metric-format logs.
- Google Cloud: the Ops Agent's ``prometheus`` receiver, into Cloud Monitoring
  (``prometheus.googleapis.com/...`` metrics).
- Azure: the Azure Monitor agent does not scrape Prometheus endpoints on a VM; Telegraf's
  ``prometheus`` input with its ``azure_monitor`` output (the VM's managed identity) sends
  them to Azure Monitor as custom metrics, the route Azure documents for Linux VMs.

:func:`agent_files` returns ``{path on the VM: content}``; the bootstrap writes them and
restarts the cloud's agent (docs/observability.md, "On each cloud").
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import yaml

from spotgpu.catalogue import CLOUDS, Cloud
from spotgpu.observability import AGENT_JOB, CONTROLLER_JOB

#: The agent's defaults (spotgpu.bootstrap.AgentConfig.telemetryPort, AgentRuntime.telemetryHost).
AGENT_HOST = "127.0.0.1"
AGENT_PORT = 9464
#: The series each cloud agent forwards: spotgpu's own, not the client library's process_*.
SPOTGPU_SERIES = "spotgpu_.*"

CLOUDWATCH_CONFIG = "/opt/aws/amazon-cloudwatch-agent/etc/amazon-cloudwatch-agent.json"
CLOUDWATCH_PROMETHEUS = "/opt/aws/amazon-cloudwatch-agent/etc/prometheus.yaml"
OPS_AGENT_CONFIG = "/etc/google-cloud-ops-agent/config.yaml"
TELEGRAF_CONFIG = "/etc/telegraf/telegraf.d/spotgpu.conf"


def prometheus_scrape_config(
    agents: Sequence[str], controllers: Sequence[str] = (), interval_seconds: float = 15
) -> dict[str, object]:
    """A Prometheus server's ``scrape_configs`` for agents and controllers (``host:port`` each)."""
    jobs: list[dict[str, object]] = [
        {"job_name": AGENT_JOB, "scrape_interval": f"{interval_seconds:g}s", "static_configs": [{"targets": list(agents)}]}
    ]
    if controllers:
        jobs.append(
            {
                "job_name": CONTROLLER_JOB,
                "scrape_interval": f"{interval_seconds:g}s",
                "static_configs": [{"targets": list(controllers)}],
            }
        )
    return {"scrape_configs": jobs}


def _local_job(host: str, port: int, interval_seconds: float) -> dict[str, object]:
    return {
        "job_name": AGENT_JOB,
        "scrape_interval": f"{interval_seconds:g}s",
        "static_configs": [{"targets": [f"{host}:{port}"]}],
        "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": SPOTGPU_SERIES, "action": "keep"}],
    }


def agent_files(cloud: Cloud, pool: str, *, host: str = AGENT_HOST, port: int = AGENT_PORT,
                interval_seconds: float = 60) -> dict[str, str]:  # fmt: skip
    """``{path on the VM: content}`` that make the cloud's monitoring agent scrape the spotgpu agent."""
    if cloud == "aws":
        prometheus = {"global": {"scrape_interval": f"{interval_seconds:g}s"},
                      "scrape_configs": [_local_job(host, port, interval_seconds)]}  # fmt: skip
        agent = {
            "logs": {
                "metrics_collected": {
                    "prometheus": {
                        "log_group_name": f"/spotgpu/{pool}/prometheus",
                        "prometheus_config_path": CLOUDWATCH_PROMETHEUS,
                        "emf_processor": {
                            "metric_namespace": "spotgpu",
                            "metric_declaration": [
                                {
                                    "source_labels": ["job"],
                                    "label_matcher": f"^{AGENT_JOB}$",
                                    "dimensions": [["instance"]],
                                    "metric_selectors": [f"^{SPOTGPU_SERIES}$"],
                                }
                            ],
                        },
                    }
                },
            }
        }
        return {
            CLOUDWATCH_PROMETHEUS: yaml.safe_dump(prometheus, sort_keys=False),
            CLOUDWATCH_CONFIG: json.dumps(agent, indent=2) + "\n",
        }
    if cloud == "gcp":
        ops = {
            "metrics": {
                "receivers": {"spotgpu": {"type": "prometheus", "config": {"scrape_configs": [_local_job(host, port, interval_seconds)]}}},
                "service": {"pipelines": {"spotgpu": {"receivers": ["spotgpu"]}}},
            }
        }
        return {OPS_AGENT_CONFIG: yaml.safe_dump(ops, sort_keys=False)}
    if cloud == "azure":
        conf = f"""# spotgpu agent metrics -> Azure Monitor custom metrics (Telegraf; the VM's managed identity)
[[inputs.prometheus]]
  urls = ["http://{host}:{port}/metrics"]
  interval = "{interval_seconds:g}s"
  namepass = ["spotgpu_*"]
  [inputs.prometheus.tags]
    pool = "{pool}"

[[outputs.azure_monitor]]
  namespace_prefix = "spotgpu/"
"""
        return {TELEGRAF_CONFIG: conf}
    raise ValueError(f"cloud {cloud!r}: use one of {', '.join(CLOUDS)}")


#: What the bootstrap runs after writing :func:`agent_files` (the agent itself is installed by the image or by it).
RESTART_COMMANDS: dict[Cloud, str] = {
    "aws": f"/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s -c file:{CLOUDWATCH_CONFIG}",
    "gcp": "systemctl restart google-cloud-ops-agent",
    "azure": "systemctl restart telegraf",
}
