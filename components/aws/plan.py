"""Pure planning for an AWS spot GPU pool: every decision, no resources.

The components in this package are thin: they turn an :class:`AwsPoolPlan` into
resources. Everything a reviewer might question (physical names, the link tags
the policy pack reads, the allocation strategy, the lifecycle heartbeat, the
fleet overrides and their priorities, the bootstrap) is decided here, from the
validated spec alone, so it can be tested without Pulumi. What every cloud decides
the same way (prefix, store URL, link tags, waiver text, agent config) comes from
:mod:`spotgpu_pulumi.planning`.

Physical names are deterministic (``spotgpu-<environment>-<pool>-<role>``)
rather than Pulumi auto-names: the bootstrap, the link tags and the EventBridge
patterns must name the Auto Scaling groups and the bucket *before* they exist,
and plain strings keep the user data and tags free of unknowns in a preview.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement

from spotgpu.agent.config import AgentConfig
from spotgpu.bootstrap import control_store_url, render_bootstrap_b64
from spotgpu.config import PlanError
from spotgpu.gang.launch import GangLaunch
from spotgpu.models.base import FieldProblem
from spotgpu.models.pools import AwsPoolSpec
from spotgpu.models.refs import Ref
from spotgpu_pulumi import planning
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.aws.controller_job import ControllerJobPlan, plan_controller_job
from spotgpu_pulumi.aws.rendezvous import RendezvousPlan, plan_rendezvous

#: Name of the termination lifecycle hook on both groups; the agent completes it after draining.
DRAIN_HOOK = "spotgpu-drain"
#: Lifecycle hook limits from the Auto Scaling API (HeartbeatTimeout).
HEARTBEAT_MIN, HEARTBEAT_MAX = 30, 7200
#: EC2 Fleet capacity-rebalance TerminationDelay limits (launch-before-terminate).
TERMINATION_DELAY_MIN, TERMINATION_DELAY_MAX = 120, 7200


def spot_allocation_strategy(ranked_types: bool) -> str:
    """``price-capacity-optimized`` unless the types are ranked.

    AWS recommends price-capacity-optimized for Spot: it picks the deepest pools
    among the cheapest, which lowers interruption rates. ``lowest-price`` is
    never used (it concentrates the pool where interruptions are most likely).
    """
    return "capacity-optimized-prioritized" if ranked_types else "price-capacity-optimized"


def lifecycle_heartbeat_seconds(notice_seconds: float, safety_margin_seconds: float, write_seconds: float) -> int:
    """Heartbeat of the termination hook: long enough for the agent to drain.

    A Spot reclaim lands at the end of the notice whatever the hook says, so for
    a notice the hook only needs ``notice + margin``. Terminations the group
    starts itself (capacity rebalancing, scale-in of the fallback) wait for the
    hook, so it also covers one full checkpoint write plus the margin. Clamped
    to the API's 30..7200 s. The agent sends no heartbeats (the workload's final-checkpoint budget
    is fixed when the notice arrives), so a longer write needs ``checkpointWriteSeconds`` raised.
    """
    need = max(notice_seconds, write_seconds) + safety_margin_seconds
    return int(min(HEARTBEAT_MAX, max(HEARTBEAT_MIN, math.ceil(need))))


def fleet_termination_delay(heartbeat_seconds: int) -> int:
    """Fleet launch-before-terminate delay: the drain time, within the API's 120..7200 s."""
    return min(TERMINATION_DELAY_MAX, max(TERMINATION_DELAY_MIN, heartbeat_seconds))


@dataclass(frozen=True)
class AsgOverride:
    """One instance type of the mixed instances policy; list order is the priority."""

    instance_type: str
    weighted_capacity: str


@dataclass(frozen=True)
class FleetOverride:
    """One (instance type, subnet) launch pool of an EC2 Fleet."""

    key: str
    instance_type: str
    subnet_id: Ref
    zone: str
    priority: float
    weighted_capacity: float


def node_weight(instance_type: str) -> int:
    """Capacity units per instance: 1, because pool capacity is counted in nodes.

    A training job's world size is a node count, so a 4-GPU g6e.12xlarge and a
    4-GPU g5.12xlarge each fill one rank slot. Weighting by vCPU or GPU count
    would let the group satisfy "8 units" with 2 large nodes and break the job.
    """
    return 1


def asg_overrides(instance_types: tuple[str, ...]) -> list[AsgOverride]:
    """Explicit overrides in the spec's order (the rank for capacity-optimized-prioritized)."""
    return [AsgOverride(t, str(node_weight(t))) for t in instance_types]


def fleet_overrides(instance_types: tuple[str, ...], subnets: list[tuple[Ref, str]]) -> list[FleetOverride]:
    """One override per instance type x subnet, priority = type rank starting at 1.

    An EC2 Fleet only launches into the subnets its overrides name, so every
    type is repeated per subnet to spread over zones. Priorities start at 1
    because the provider historically drops a zero priority. ``subnets`` is a
    list of ``(subnet_id, zone)``; keys are stable (type and subnet, no indices).
    """
    return [
        FleetOverride(
            # A subnet id known only later (an Output) is keyed by its zone and position.
            key=f"{itype}@{subnet_id if isinstance(subnet_id, str) else f'{zone}#{i}'}",
            instance_type=itype,
            subnet_id=subnet_id,
            zone=zone,
            priority=float(rank),
            weighted_capacity=float(node_weight(itype)),
        )
        for rank, itype in enumerate(instance_types, start=1)
        for i, (subnet_id, zone) in enumerate(subnets)
    ]


@dataclass(frozen=True)
class MaintenancePolicy:
    """Launch replacements before terminating (rebalancing, refresh), never drop below desired."""

    min_healthy_percentage: int = 100
    max_healthy_percentage: int = 200


@dataclass(frozen=True)
class PoolNames:
    """Deterministic physical names: known before creation, unique per environment."""

    spot_group: str
    fallback_group: str
    spot_template: str
    fallback_template: str
    bucket: str
    queue: str

    @classmethod
    def for_pool(cls, environment: str, spec: AwsPoolSpec) -> PoolNames:
        base = f"spotgpu-{environment}-{spec.name}"
        return cls(
            spot_group=f"{base}-spot",
            fallback_group=f"{base}-fallback",
            spot_template=f"{base}-spot",
            fallback_template=f"{base}-fallback",
            bucket=spec.bucket_name or f"{base}-checkpoints",
            queue=f"{base}-events",
        )


@dataclass(frozen=True)
class AwsPoolPlan:
    """Everything the AWS components build for one pool, decided up front."""

    #: what it was planned from (the workload and ladder the controller's config is rendered from)
    args: PoolArgs
    spec: AwsPoolSpec
    pool: str
    mode: Literal["asg", "fleet"]
    names: PoolNames
    prefix: str
    checkpoint_store: str
    #: the controller's state URL (drain requests, records), next to the checkpoints
    control_store: str
    heartbeat_seconds: int
    allocation_strategy: str
    asg_overrides: list[AsgOverride]
    fleet_overrides: list[FleetOverride]
    termination_delay_seconds: int
    spot_user_data: str
    fallback_user_data: str
    spot_links: dict[str, str]
    fallback_links: dict[str, str]
    base_tags: dict[str, str]
    #: A gang pool's rendezvous host (None: the pool runs no gang, and nothing of it exists).
    rendezvous: RendezvousPlan | None = None
    #: The scheduled controller (None when ``controller.enabled`` is false, or in fleet mode, which it cannot drive).
    controller_job: ControllerJobPlan | None = None

    def tags(self, links: dict[str, str], resource: str) -> dict[str, str]:
        """Base tags + link tags + a readable Name."""
        return {**self.base_tags, **links, "Name": resource}

    def pool_tags(self) -> dict[str, str]:
        """Tags of a resource that belongs to the pool but plays no linked role (the node identity)."""
        return planning.pool_tags(self.base_tags, self.pool)

    def role_tags(self, role: str) -> dict[str, str]:
        """Tags of a supporting resource (bucket, queue, drill, controller)."""
        return planning.role_tags(self.base_tags, self.pool, role)


def with_aws_extra(agent_package: str) -> str:
    """``spotgpu`` -> ``spotgpu[aws]``, ``spotgpu==X`` -> ``spotgpu[aws]==X``; anything else as given.

    Completing the lifecycle hook needs boto3 on the VM, which is the ``aws``
    extra. Only a plain requirement on the ``spotgpu`` distribution is rewritten:
    a wheel URL, a path, another name or a requirement that already lists extras
    is the user's explicit choice and is left alone.
    """
    try:
        req = Requirement(agent_package)
    except InvalidRequirement:
        return agent_package  # a wheel path or URL pip understands but packaging does not
    text = agent_package.strip()
    if req.name.lower() != "spotgpu" or req.url or req.extras or not text.lower().startswith("spotgpu"):
        return agent_package
    cut = len(req.name)
    return f"{text[:cut]}[aws]{text[cut:]}"  # the user's own version text, untouched


def user_data(config: AgentConfig, agent_package: str, gang: GangLaunch | None = None) -> str:
    """Base64 bootstrap; an agent that completes a lifecycle hook gets boto3 (the aws extra)."""
    package = with_aws_extra(agent_package) if config.lifecycle_hook else agent_package
    return render_bootstrap_b64(config, package, gang)


def controller_runs(spec: AwsPoolSpec) -> bool:
    """The pool deploys its controller job: enabled, and in asg mode (the AWS adapter drives Auto Scaling
    groups, so a fleet pool gets a warning and no job; the policy pack fails it unless waived)."""
    return spec.controller.enabled and spec.mode == "asg"


def plan_pool(args: PoolArgs) -> AwsPoolPlan:
    """Decide the whole pool from its validated args; raises :class:`~spotgpu.config.PlanError` on bad input
    (the bootstrap's size limit, ``spotgpu.bootstrap.MAX_BOOTSTRAP_BYTES``, at the pool's ``agentPackage``)."""
    spec = planning.cloud_spec(args, AwsPoolSpec, "AWS")
    try:
        return _plan(args, spec)
    except FieldProblem as problem:  # the checks below point at keys of the pool
        raise PlanError(problem, pool=spec.name) from None


def _plan(args: PoolArgs, spec: AwsPoolSpec) -> AwsPoolPlan:
    names = PoolNames.for_pool(args.environment, spec)
    prefix = planning.checkpoint_prefix(spec)
    store = planning.store_url("s3", names.bucket, prefix)
    heartbeat = lifecycle_heartbeat_seconds(
        spec.notice.notice_seconds, spec.notice.safety_margin_seconds, args.workload.checkpoint_write_seconds
    )
    spot_group = names.spot_group if spec.mode == "asg" else None  # fleet instances have no lifecycle hook
    spot_agent = planning.agent_config(
        args, "spot", store, lifecycle_hook=DRAIN_HOOK if spot_group else None, autoscaling_group=spot_group,
        lifecycle_hook_heartbeat_seconds=heartbeat,
    )
    fallback_agent = planning.agent_config(
        args, "on-demand", store, lifecycle_hook=DRAIN_HOOK, autoscaling_group=names.fallback_group,
        lifecycle_hook_heartbeat_seconds=heartbeat,
    )
    base = f"spotgpu-{args.environment}-{spec.name}"
    rendezvous = plan_rendezvous(spec, base, planning.pool_tags(args.base_tags, spec.name))
    gang = rendezvous.launch if rendezvous else None
    controller_tags = planning.role_tags(args.base_tags, spec.name, "controller")

    def links(role: str) -> dict[str, str]:
        """Both groups carry the whole map: they share the launch settings, waivers included."""
        # the subnets are named by id, which names no zone: the pool's zones travel as a link
        return planning.capacity_links(args, role, store, notice="aws", fallback_group=names.fallback_group,
                                       zones=spec.zones)

    return AwsPoolPlan(
        args=args,
        spec=spec,
        pool=spec.name,
        mode=spec.mode,
        names=names,
        prefix=prefix,
        checkpoint_store=store,
        control_store=control_store_url(store),
        heartbeat_seconds=heartbeat,
        allocation_strategy=spot_allocation_strategy(spec.ranked_types),
        asg_overrides=asg_overrides(spec.instance_types),
        fleet_overrides=fleet_overrides(spec.instance_types, [(s.id, s.zone) for s in spec.subnets]),
        termination_delay_seconds=fleet_termination_delay(heartbeat),
        spot_user_data=user_data(spot_agent, spec.agent_package, gang),
        fallback_user_data=user_data(fallback_agent, spec.agent_package, gang),
        spot_links=links("spot-pool"),
        fallback_links=links("fallback"),
        base_tags=args.base_tags,
        rendezvous=rendezvous,
        controller_job=plan_controller_job(spec, base, controller_tags) if controller_runs(spec) else None,
    )
