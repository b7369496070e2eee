"""The one bootstrap renderer every cloud's pool uses.

It renders a shell script (AWS user data, GCP startup script, Azure custom data)
that installs the spotgpu runtime into its own virtualenv, writes the agent's
config (this pool's notice contract, checkpoint store and interval) and starts
``spotgpu-agent.service`` under systemd. Output is deterministic so it can be
snapshot-tested and so an unchanged pool produces no diff in ``pulumi preview``.
"""

from __future__ import annotations

import base64
import json
import shlex
from typing import Literal

from pydantic import Field

from spotgpu.gang.launch import GangLaunch, launcher_argv
from spotgpu.models.base import SpotModel
from spotgpu.tags import AGENT_MARKER

#: AWS launch-template user data is limited to 16 KB (before base64); Azure custom data to 64 KB.
MAX_BOOTSTRAP_BYTES = {"aws": 16 * 1024, "gcp": 256 * 1024, "azure": 64 * 1024 - 1}
AGENT_CONFIG_PATH = "/etc/spotgpu/agent.json"
#: Must stay in step with ``spotgpu.agent.cli`` (tests/agent/test_bootstrap_snapshot.py parses it back).
AGENT_EXEC_START = f"/opt/spotgpu/venv/bin/spotgpu agent run --config {AGENT_CONFIG_PATH}"
#: The gang launch unit (pools that run gangs only): ``spotgpu gang run -- torchrun ...``.
GANG_UNIT = "spotgpu-gang.service"
SPOTGPU_BIN = "/opt/spotgpu/venv/bin/spotgpu"


class AgentRuntime(SpotModel):
    """Agent tuning; every field has the production default, tests shorten the timings."""

    metadata_url: str | None = Field(
        default=None, description="Metadata base URL; default: the provider's link-local endpoint."
    )
    poll_interval_seconds: float = Field(
        default=1.0, gt=0, le=5, description="AWS IMDS and Azure Scheduled Events poll interval."
    )
    hanging_get_timeout_seconds: int = Field(
        default=60, ge=1, le=3600, description="GCP: timeout_sec of each hanging GET."
    )
    request_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    error_backoff_seconds: float = Field(default=1.0, gt=0, le=60)
    imds_token_ttl_seconds: int = Field(default=21600, ge=1, le=21600, description="AWS IMDSv2 token TTL.")
    telemetry_host: str | None = Field(default="127.0.0.1", description="Prometheus bind address; null disables.")
    events_log: str | None = Field(default="-", description="JSON-lines log path, '-' for stdout, null for none.")
    notice_signal: str | None = Field(default=None, description="Signal sent to workload process groups on a notice.")
    drain_signal: str | None = Field(default=None, description="Signal sent to workload process groups at drain.")
    workload_pid_file: str | None = Field(default=None, description="PID file of a workload that cannot register.")
    notice_hook: list[str] | None = Field(default=None, description="Command (argv) started on a notice.")
    drain_hook: list[str] | None = Field(default=None, description="Command (argv) run at drain, until the deadline.")
    vm_name: str | None = Field(default=None, description="Azure: override the IMDS compute.name match.")
    control_poll_seconds: float = Field(
        default=10.0, gt=0, le=300, description="How often the agent reads its drain request from controlStore."
    )
    drain_budget_seconds: float = Field(
        default=300.0, gt=0, le=3600, description="Time a controller drain gives the final checkpoint."
    )


class AgentConfig(SpotModel):
    """What the agent on this VM needs to know; written to /etc/spotgpu/agent.json."""

    provider: Literal["aws", "gcp", "azure"]
    pool: str
    capacity_type: Literal["spot", "on-demand"] = "spot"
    notice: dict[str, object] = Field(description="The pool's notice contract, as its model dumps it.")
    checkpoint_store: str
    checkpoint_interval_seconds: int = Field(gt=0)
    control_socket: str = "/run/spotgpu/agent.sock"
    telemetry_port: int = 9464
    lifecycle_hook: str | None = Field(default=None, description="AWS: termination lifecycle hook name.")
    autoscaling_group: str | None = Field(default=None, description="AWS: the pool's Auto Scaling group.")
    control_store: str | None = Field(
        default=None,
        description="The fallback controller's stateUrl: drain requests in, committed checkpoints out; "
        "None turns the drain protocol off (see control_store_url).",
    )
    runtime: AgentRuntime | None = Field(default=None, description="Agent tuning; omitted means the defaults.")

    def effective_runtime(self) -> AgentRuntime:
        return self.runtime or AgentRuntime()


#: Where a pool's controller keeps its record, drain requests and agent commits, under the
#: pool's checkpoint store (the GCP controller's IAM condition is scoped to this prefix).
CONTROL_STORE_SUFFIX = "_controller"


def control_store_url(checkpoint_store: str) -> str:
    """The controller's ``stateUrl`` for a pool: its checkpoint store URL + ``/_controller``.

    The components write Azure checkpoint stores as ``az://ACCOUNT/CONTAINER/PREFIX``,
    which obstore cannot open (its ``az://`` form has no account), so that form is
    rewritten to the blob endpoint URL obstore parses on its own.
    """
    base = checkpoint_store.rstrip("/")
    if base.startswith("az://"):
        parts = base.removeprefix("az://").split("/", 2)
        if len(parts) < 2 or not all(parts):
            raise ValueError(
                f"checkpoint store {checkpoint_store!r}: expected az://ACCOUNT/CONTAINER[/PREFIX]; "
                "fix: name the storage account and the container"
            )
        base = f"https://{parts[0]}.blob.core.windows.net/{'/'.join(parts[1:])}"
    return f"{base}/{CONTROL_STORE_SUFFIX}"


def gang_unit(launch: GangLaunch, control_socket: str) -> str:
    """The systemd unit that supervises a gang job on this VM (see spotgpu.gang.launch).

    ``spotgpu gang run`` does the restarting by the workers' exit code (75/76 rejoin at
    once, real failures ``maxFailures`` times) and exits 0 once this VM drains, so systemd
    only restarts it if it dies abnormally (a signal, a core dump), never on an exit code.
    """
    command = shlex.join(launcher_argv(launch, spotgpu=SPOTGPU_BIN))
    return f"""[Unit]
Description=spotgpu gang launch (torchrun, rendezvous {launch.rendezvous_host}:{launch.rendezvous_port})
After={AGENT_MARKER} network-online.target
Wants={AGENT_MARKER} network-online.target

[Service]
Environment=SPOTGPU_AGENT={control_socket}
ExecStart={command}
Restart=on-abnormal
RestartSec=5

[Install]
WantedBy=multi-user.target
"""


def render_bootstrap(config: AgentConfig, agent_package: str = "spotgpu", gang: GangLaunch | None = None) -> str:
    """A POSIX shell script that installs and starts the node agent (and, for a gang pool, the launch)."""
    cfg = json.dumps(config.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True, indent=1)
    script = f"""#!/bin/bash
# spotgpu bootstrap: install the node agent for pool {config.pool} ({config.provider}, {config.capacity_type}).
# Periodic checkpoints protect the work; the agent turns a notice into stop-new-work,
# a best-effort final checkpoint and a drain.
set -euo pipefail
install -d -m 0755 /etc/spotgpu /opt/spotgpu /run/spotgpu
cat > /etc/spotgpu/agent.json <<'SPOTGPU_CONFIG'
{cfg}
SPOTGPU_CONFIG
if [ ! -x /opt/spotgpu/venv/bin/spotgpu ]; then
  python3 -m venv /opt/spotgpu/venv
  /opt/spotgpu/venv/bin/pip install --quiet {shlex.quote(agent_package)}
fi
cat > /etc/systemd/system/{AGENT_MARKER} <<'SPOTGPU_UNIT'
[Unit]
Description=spotgpu node agent (interruption notices, drain, telemetry)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart={AGENT_EXEC_START}
Restart=always
RestartSec=2
RuntimeDirectory=spotgpu

[Install]
WantedBy=multi-user.target
SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now {AGENT_MARKER}
"""
    if gang is not None:
        script += f"""cat > /etc/systemd/system/{GANG_UNIT} <<'SPOTGPU_UNIT'
{gang_unit(gang, config.control_socket)}SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now {GANG_UNIT}
"""
    limit = MAX_BOOTSTRAP_BYTES[config.provider]
    if len(script.encode()) > limit:
        raise ValueError(
            f"bootstrap for pool {config.pool} is {len(script.encode())} bytes, over the "
            f"{config.provider} limit of {limit}; shorten agentPackage or the checkpoint store URL"
        )
    return script


def render_bootstrap_b64(config: AgentConfig, agent_package: str = "spotgpu", gang: GangLaunch | None = None) -> str:
    """Base64 form for AWS launch-template user data and Azure custom data."""
    return base64.b64encode(render_bootstrap(config, agent_package, gang).encode()).decode()


#: The rendezvous host's unit: ``spotgpu gang store`` (torch's TCPStore), restarted whenever it stops.
STORE_UNIT = "spotgpu-gang-store.service"
#: The store host needs torch for the TCPStore, not CUDA: the CPU wheels are a tenth of the size.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def render_store_bootstrap(port: int, agent_package: str = "spotgpu") -> str:
    """User data of a gang's rendezvous host: install spotgpu and torch (CPU), serve the store on ``port``."""
    return f"""#!/bin/bash
# spotgpu rendezvous host: serves a gang's torchrun c10d rendezvous store on port {port}.
# It runs on demand so that no spot notice can take the gang's next rendezvous down.
set -euo pipefail
install -d -m 0755 /opt/spotgpu
if [ ! -x /opt/spotgpu/venv/bin/spotgpu ]; then
  python3 -m venv /opt/spotgpu/venv
  /opt/spotgpu/venv/bin/pip install --quiet torch --index-url {TORCH_CPU_INDEX}
  /opt/spotgpu/venv/bin/pip install --quiet {shlex.quote(agent_package)}
fi
cat > /etc/systemd/system/{STORE_UNIT} <<'SPOTGPU_UNIT'
[Unit]
Description=spotgpu gang rendezvous store (torch TCPStore on port {port})
After=network-online.target
Wants=network-online.target

[Service]
ExecStart={SPOTGPU_BIN} gang store --port {port}
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now {STORE_UNIT}
"""
