"""The controller's config, rendered from the stack's own validated models.

The stack already knows everything ``controller.yaml`` needs: the pool spec, its
workload profile and ladder (the same :class:`WorkloadProfile` and
:class:`FallbackLadder` objects), and the names the components give the groups
and event sources. Rendering from them, instead of asking a person to repeat
them by hand, means the controller cannot drift from what was deployed. The
result is a validated :class:`ControllerConfig`: rendering runs the controller's
own validators, and :func:`config_document` round-trips through
``spotgpu controller validate``.

Pure: no Pulumi, no cloud. The components call it inside an ``apply`` once the
queue URL (AWS) or subscription id is known.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from spotgpu.config import ConfigError, format_error
from spotgpu.controller.config import ControllerConfig
from spotgpu.models.gpu_fit import group_gpu_keys
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.models.pools import AwsPoolSpec, AzurePoolSpec, GcpPoolSpec
from spotgpu.models.workload import WorkloadProfile

#: The environment variable a deployed job reads its config from (``--config env:SPOTGPU_CONTROLLER_CONFIG``).
CONFIG_ENV = "SPOTGPU_CONTROLLER_CONFIG"
#: Slack the lease keeps over the job's own timeout: a tick killed at its timeout still held a valid lease.
LEASE_SLACK_SECONDS = 30


def render_controller_config(
    pool: AwsPoolSpec | GcpPoolSpec | AzurePoolSpec,
    workload: WorkloadProfile,
    ladder: FallbackLadder,
    *,
    state_url: str,
    primary_group: str,
    fallback_group: str,
    alternate_groups: Sequence[str] = (),
    alternate_role: StepKind = StepKind.ALTERNATE_SKU,
    cloud: dict[str, Any],
    group_types: Mapping[str, Sequence[str]] | None = None,
) -> ControllerConfig:
    """One pool's ControllerConfig. ``cloud`` holds the per-cloud keys (region + queueUrl, project + region +
    subscription, subscriptionId + resourceGroupName). ``group_types`` names the types each group may
    launch: with the workload's ``gpu`` block, a group then carries its GPU count, model and spot price
    (:func:`spotgpu.models.gpu_fit.group_gpu_keys`), so the controller counts GPUs and work, not nodes."""
    deploy = pool.controller
    types = group_types or {}

    def keys(group: str, spot: bool) -> dict[str, Any]:
        return group_gpu_keys(pool, workload, tuple(types.get(group, ())), spot=spot)

    groups: list[dict[str, Any]] = [{"name": primary_group, "role": StepKind.SAME_POOL.value, **keys(primary_group, True)}]
    groups += [{"name": g, "role": alternate_role.value, **keys(g, True)} for g in alternate_groups]
    groups.append({"name": fallback_group, "role": StepKind.ON_DEMAND.value, "maxSize": pool.capacity.fallback_limit,
                   **keys(fallback_group, False)})  # fmt: skip
    doc = {
        "stateUrl": state_url,
        "tickSeconds": deploy.schedule_minutes * 60,
        "telemetry": {"jsonLines": "-"},
        "lease": {"ttlSeconds": deploy.timeout_seconds + LEASE_SLACK_SECONDS, "maxClockSkewSeconds": 10},
        # measuredProfile's figures are already in the model: the path means nothing where the job runs
        "workloads": {pool.workload: _workload_doc(workload)},
        "ladders": {pool.ladder: ladder.model_dump(by_alias=True, mode="json", exclude_none=True)},
        "pools": [
            {
                "cloud": pool.cloud,
                "name": pool.name,
                "workload": pool.workload,
                "ladder": pool.ladder,
                "capacity": pool.capacity.model_dump(by_alias=True, mode="json", exclude_none=True),
                "groups": groups,
                **cloud,
            }
        ],
    }
    try:
        return ControllerConfig.model_validate(doc)
    except ValidationError as err:
        raise ConfigError(format_error(err, namespace=f"controller({pool.name})", model=ControllerConfig)) from None


def _workload_doc(workload: WorkloadProfile) -> dict[str, Any]:
    return workload.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"measured_profile", "sources"})


def config_document(config: ControllerConfig) -> dict[str, Any]:
    """The camelCase document ``spotgpu controller validate`` and ``run --config`` read."""
    # a workload's ``sources`` annotate the preview's figures; the deployed controller has no use for them
    return config.model_dump(by_alias=True, mode="json", exclude_none=True,
                             exclude={"workloads": {"__all__": {"sources"}}})


def config_json(config: ControllerConfig) -> str:
    return json.dumps(config_document(config), sort_keys=True, separators=(",", ":"))
