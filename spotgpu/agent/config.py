"""The node agent's config: what the agent on a VM needs to know, written to /etc/spotgpu/agent.json.

The bootstrap (:mod:`spotgpu.bootstrap`) renders it from the pool; the agent reads it at
start. Its validators are the agent's own checks (signals, control address, metadata URL,
the provider's notice contract and poll floor), so the model lives with the agent and the
bootstrap imports it, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from spotgpu.agent import aws as agent_aws
from spotgpu.agent import azure as agent_azure
from spotgpu.agent.actions import parse_signal
from spotgpu.agent.control import parse_address
from spotgpu.agent.http import check_base_url
from spotgpu.agent.response_rules import contract_from_config
from spotgpu.catalogue import CLOUDS, Cloud
from spotgpu.contract.vm import AGENT_CONFIG_PATH
from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.notice import AwsNoticeContract, AzureNoticeContract, GcpNoticeContract
from spotgpu.models.tiers import LocalTierConfig
from spotgpu.models.urls import EndpointUrl, StoreUrlText

#: Must stay in step with ``spotgpu.agent.cli`` (tests/agent/test_bootstrap_snapshot.py parses it back).
AGENT_EXEC_START = f"/opt/spotgpu/venv/bin/spotgpu agent run --config {AGENT_CONFIG_PATH}"


class AgentRuntime(SpotModel):
    """Agent tuning; every field has the production default, tests shorten the timings."""

    metadata_url: EndpointUrl | None = Field(
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

    provider: Cloud
    pool: str
    capacity_type: Literal["spot", "on-demand"] = "spot"
    notice: dict[str, object] = Field(description="The pool's notice contract, as its model dumps it.")
    checkpoint_store: StoreUrlText
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
    lifecycle_hook_heartbeat_seconds: int | None = Field(
        default=None,
        ge=30,
        le=7200,
        description="AWS: the hook's heartbeat timeout, how long a scaled-in VM may drain (None: the API's 3600).",
        json_schema_extra=fix_hint("use the hook's HeartbeatTimeout, 30 to 7200 seconds"),
    )
    autoscaling_group: str | None = Field(default=None, description="AWS: the pool's Auto Scaling group.")
    control_store: StoreUrlText | None = Field(
        default=None,
        description="The fallback controller's stateUrl: drain requests in, committed checkpoints out; "
        "None turns the drain protocol off (see control_store_url).",
    )
    local_tier: LocalTierConfig | None = Field(
        default=None,
        description="A tiered workload's node-local checkpoint tier (spotgpu.models.tiers): mounted at boot, "
        "read by the checkpoint library; None: every save goes to the object store.",
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
            at = ".".join(str(p) for p in first["loc"] if p not in CLOUDS)
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
