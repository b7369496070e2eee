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
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from spotgpu.agent import aws as agent_aws
from spotgpu.agent import azure as agent_azure
from spotgpu.agent.actions import parse_signal
from spotgpu.agent.control import parse_address
from spotgpu.agent.http import check_base_url
from spotgpu.agent.plan import contract_from_config
from spotgpu.gang.launch import GangLaunch, launcher_argv
from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.notice import AwsNoticeContract, AzureNoticeContract, GcpNoticeContract
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
        default=1.0,
        gt=0,
        le=5,
        description="AWS IMDS and Azure Scheduled Events poll interval (floors per provider: see AgentConfig).",
        json_schema_extra=fix_hint("use 1 (the default) or another value up to 5 seconds"),
    )
    hanging_get_timeout_seconds: int = Field(
        default=60, ge=1, le=3600, description="GCP: timeout_sec of each hanging GET."
    )
    plain_read_seconds: float = Field(
        default=2.0,
        ge=0.2,
        le=30,
        description="GCP: a plain read (no wait_for_change) of each watched value this often, beside the "
        "hanging GET, so a stalled hanging GET cannot hide a notice for longer.",
        json_schema_extra=fix_hint("use 2 (the default), between 0.2 and 30 seconds"),
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

    @field_validator("metadata_url")
    @classmethod
    def _plain_http(cls, url: str | None) -> str | None:
        if url is not None:
            _checked(check_base_url, url)
        return url

    @field_validator("notice_signal", "drain_signal")
    @classmethod
    def _known_signal(cls, name: str | None) -> str | None:
        _checked(parse_signal, name)
        return name

    @field_validator("notice_hook", "drain_hook")
    @classmethod
    def _argv(cls, argv: list[str] | None) -> list[str] | None:
        if argv is not None and (not argv or not argv[0]):
            raise ValueError('an empty command; give the argv as a list, e.g. ["/usr/local/bin/hook"], or null')
        return argv


class AgentConfig(SpotModel):
    """What the agent on this VM needs to know; written to /etc/spotgpu/agent.json."""

    provider: Literal["aws", "gcp", "azure"]
    pool: str
    capacity_type: Literal["spot", "on-demand"] = "spot"
    notice: dict[str, object] = Field(description="The pool's notice contract, as its model dumps it.")
    checkpoint_store: str
    checkpoint_interval_seconds: int = Field(gt=0)
    control_socket: str = Field(
        default="/run/spotgpu/agent.sock",
        description="The control endpoint: a Unix socket path or 127.0.0.1:PORT (loopback only).",
    )
    telemetry_port: int = Field(
        default=9464,
        ge=0,
        le=65535,
        description="Prometheus port; 0 picks a free port (tests, demos).",
        json_schema_extra=fix_hint("use a port 1 to 65535 (9464 is the default)"),
    )
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

    @field_validator("control_socket")
    @classmethod
    def _control_address(cls, address: str) -> str:
        _checked(parse_address, address)
        return address

    @model_validator(mode="after")
    def _fits_the_provider(self) -> AgentConfig:
        """What only the provider decides: its notice contract, its poll floor, AWS's hook pair."""
        try:
            contract_from_config(self.provider, self.notice)
        except ValidationError as err:
            first = err.errors()[0]
            at = ".".join(str(p) for p in first["loc"] if p not in ("aws", "gcp", "azure"))
            raise FieldProblem(
                first["msg"].removeprefix("Value error, "),
                at=f"notice.{at}" if at else "notice",
                value=first.get("input"),
                fix=_notice_fix(self.provider, at)
                or "render the bootstrap from the pool's notice contract (see docs/configuration.md)",
            ) from None
        except ValueError as err:
            what, _, fix = str(err).partition("; fix: ")
            raise FieldProblem(what, at="notice.provider", value=self.notice.get("provider"), fix=fix) from None
        floor = {"aws": agent_aws.MIN_POLL_INTERVAL_SECONDS, "azure": agent_azure.MIN_POLL_INTERVAL_SECONDS}
        interval = self.effective_runtime().poll_interval_seconds
        if self.provider in floor and interval < floor[self.provider]:
            limit = "IMDS's 5 requests/s per VM" if self.provider == "azure" else "IMDS's per-instance throttling"
            raise FieldProblem(
                f"polls faster than {limit} allows",
                at="runtime.pollIntervalSeconds",
                value=interval,
                fix=f"use {floor[self.provider]} seconds or more (1 is the default)",
            )
        if self.lifecycle_hook and not self.autoscaling_group:
            raise FieldProblem(
                "lifecycleHook is set but autoscalingGroup is not",
                at="autoscalingGroup",
                value=None,
                fix="set autoscalingGroup to the pool's Auto Scaling group, or drop lifecycleHook",
            )
        return self


def _checked(check: Callable[[Any], object], value: Any) -> None:
    """Run an agent check; its ``...; fix: ...`` message becomes the ``what; fix`` a validator raises."""
    try:
        check(value)
    except ValueError as err:
        what, _, fix = str(err).partition("; fix: ")
        raise ValueError(f"{what}; {fix or 'see docs/agent.md'}") from None


def _notice_fix(provider: str, key: str) -> str | None:
    """The notice contract field's own fix hint (``fix_hint``), for a key like ``safetyMarginSeconds``."""
    models: dict[str, type[SpotModel]] = {"aws": AwsNoticeContract, "gcp": GcpNoticeContract, "azure": AzureNoticeContract}
    model = models[provider]
    for name, field in model.model_fields.items():
        if key in (name, field.alias) and isinstance(field.json_schema_extra, dict):
            hint = field.json_schema_extra.get("fix")
            return hint if isinstance(hint, str) else None
    return None


#: Where a pool's controller keeps its record, drain requests and agent commits, under the
#: pool's checkpoint store (the GCP controller's IAM condition is scoped to this prefix).
CONTROL_STORE_SUFFIX = "_controller"


def control_store_url(checkpoint_store: str) -> str:
    """The controller's ``stateUrl`` for a pool: its checkpoint store URL + ``/_controller``.

    Parsed by the checkpoint library's one parser. An Azure store is written as its blob
    endpoint URL (``https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX``), which every
    spotgpu version's state store opens, old ones included; ``az://ACCOUNT/CONTAINER/PREFIX``
    names the same place.
    """
    from spotgpu.contract.store_url import parse_store_url

    try:
        where = parse_store_url(checkpoint_store.rstrip("/"))
    except ValueError as err:
        raise ValueError(f"checkpoint store: {err}") from None
    if where.account is not None:
        base = f"https://{where.account}.blob.core.windows.net/{where.bucket}"
        base = f"{base}/{where.prefix}" if where.prefix else base
    else:
        base = where.text
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
