"""What every cloud's planner decides the same way, written once.

Each cloud's ``plan.py`` decides its own names, shapes and limits; the facts that
must read the same on every cloud live here: the pool's spec check, its checkpoint
prefix and store URL, the link tags the policy pack, the agent and the controller
read, the waiver text, and the node agent's config. A cloud that differs says so in
its own planner instead of bending these. Every planner refuses a pool the same way:
a :class:`spotgpu.config.PlanError` holding the findings, each at the key to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

from spotgpu.agent.config import AgentConfig
from spotgpu.bootstrap import control_store_url
from spotgpu.config import PlanError
from spotgpu.contract import tags
from spotgpu.models.base import FieldProblem
from spotgpu.models.pools import AwsPoolSpec, AzurePoolSpec, GcpPoolSpec
from spotgpu.models.tiers import LocalTierConfig, memory_budget_bytes, ram_disk_gib
from spotgpu.storage.urls import StoreUrl
from spotgpu_pulumi.args import PoolArgs

AnySpec = AwsPoolSpec | GcpPoolSpec | AzurePoolSpec
Spec = TypeVar("Spec", AwsPoolSpec, GcpPoolSpec, AzurePoolSpec)
CapacityType = Literal["spot", "on-demand"]


def cloud_spec(args: PoolArgs, spec_type: type[Spec], title: str) -> Spec:
    """``args.spec`` if it is this cloud's, else one line naming the planner that plans it.

    ``deploy`` picks the planner from the registry; a program that plans a pool by hand with
    another cloud's planner is refused before anything exists.
    """
    spec = args.spec
    if not isinstance(spec, spec_type):
        cloud = spec_type.model_fields["cloud"].default
        raise PlanError(
            FieldProblem(
                f"spotgpu_pulumi.{cloud}.plan_pool plans only {title} pools", at="cloud", value=spec.cloud,
                fix=f"plan it with spotgpu_pulumi.{spec.cloud}.plan_pool, or let spotgpu_pulumi.platform.deploy "
                "pick the cloud",
            ),
            pool=spec.name,
        )
    return spec


def checkpoint_prefix(spec: AnySpec) -> str:
    """Where the pool's checkpoints live in its store: ``checkpoint.prefix``, else the pool's name.

    Slashes at the ends are dropped on every cloud: the URL, the IAM conditions and the
    lifecycle filters all append ``/...`` to it, so ``teams/llm/`` must not become ``teams/llm//``.
    """
    return (spec.checkpoint.prefix or spec.name).strip("/")


def store_url(scheme: str, bucket: str, prefix: str, account: str | None = None) -> str:
    """The pool's checkpoint store URL in the contract's one dialect per cloud, as every part opens it.

    ``s3://BUCKET/PREFIX``, ``gs://BUCKET/PREFIX``, ``az://ACCOUNT/CONTAINER/PREFIX`` (``bucket`` is the
    container there): :attr:`spotgpu.storage.urls.StoreUrl.text`, which the parser reads back.
    """
    return StoreUrl(scheme=scheme, bucket=bucket, prefix=prefix.strip("/"), account=account).text


def waiver_text(spec: AnySpec) -> str | None:
    """The stated opt-outs, as the ``spotgpu-waiver`` link records them, keyed as the config writes them."""
    reasons = [
        f"{key}: {reason}"
        for key, reason in (("singleZone", spec.opt_out.single_zone), ("singleType", spec.opt_out.single_type))
        if reason
    ]
    return "; ".join(reasons) or None


def role_tags(base: Mapping[str, str], pool: str, role: str) -> dict[str, str]:
    """Tags of a supporting resource (store, queue, drill, controller): base tags, role and pool."""
    return {**base, **tags.pool_links(role=role, pool=pool)}


def pool_tags(base: Mapping[str, str], pool: str) -> dict[str, str]:
    """Tags of a resource that belongs to the pool but plays no linked role (an identity, the rendezvous host)."""
    return {**base, tags.POOL: pool}


def capacity_links(
    args: PoolArgs, role: str, store: str, *, notice: str | None = None, fallback_group: str | None = None,
    zones: tuple[str, ...] | None = None,
) -> dict[str, str]:
    """The link map a capacity group carries (its template, group or scale set).

    Every group names its store, ladder, workload and interval. A group given the
    ``notice`` contract (every spot group; AWS's fallback group too, which shares the
    spot group's launch settings) also names the fallback group and the stated waivers.
    """
    spec = args.spec
    noticed = notice is not None
    try:
        return tags.pool_links(
            role=role,
            pool=spec.name,
            checkpoint_store=store,
            fallback_group=fallback_group,
            ladder=args.ladder,
            workload=args.workload,
            checkpoint_interval_seconds=args.interval.seconds,
            notice=notice,
            waiver=waiver_text(spec) if noticed else None,
            controller_waiver=tags.controller_waiver(spec.controller) if noticed else None,
            zones=zones,
        )
    except FieldProblem as problem:  # the workload does not fit a tag: its key, not the pool's
        raise PlanError(problem.below(f"workloads.{spec.workload}")) from None


def agent_config(
    args: PoolArgs,
    capacity_type: CapacityType,
    store: str,
    *,
    lifecycle_hook: str | None = None,
    autoscaling_group: str | None = None,
    lifecycle_hook_heartbeat_seconds: int | None = None,
) -> AgentConfig:
    """The node agent's config on every VM of the pool; only AWS adds its lifecycle hook, its heartbeat
    (how long a scaled-in VM may drain) and its group."""
    spec = args.spec
    return AgentConfig(
        provider=spec.cloud,
        pool=spec.name,
        capacity_type=capacity_type,
        notice=spec.notice.model_dump(mode="json"),
        checkpoint_store=store,
        checkpoint_interval_seconds=args.interval.seconds,
        lifecycle_hook=lifecycle_hook,
        lifecycle_hook_heartbeat_seconds=lifecycle_hook_heartbeat_seconds if lifecycle_hook else None,
        autoscaling_group=autoscaling_group,
        control_store=control_store_url(store),  # drain requests in, committed checkpoints out
        local_tier=local_tier(args),
    )


def local_tier(args: PoolArgs) -> LocalTierConfig | None:
    """A tiered workload's local tier on every VM of the pool: where the bootstrap mounts it (local NVMe,
    else a RAM disk of this size), what it keeps, how often it uploads; None without ``checkpointTiers``."""
    workload, tier = args.workload, args.interval.tiers
    tiers = workload.checkpoint_tiers
    if tiers is None or tier is None:
        return None
    return LocalTierConfig(
        path=tiers.local.path,
        keep=tiers.local.keep,
        peer_copies=tiers.peers(workload.nodes),
        durable_interval_seconds=tier.durable_seconds,
        ram_disk_gib=ram_disk_gib(tiers, workload.checkpoint_bytes, workload.nodes),
        memory_budget_bytes=memory_budget_bytes(tiers),
    )
