"""What the pool's resources carry so the policy pack, agent and controller can find each other.

GCP labels only hold ``[a-z0-9_-]{0,63}``, so the full link map of
:func:`spotgpu.tags.pool_links` (gs:// URLs, the encoded ladder and workload)
lives in instance-template *metadata*; labels carry the simple keys only.
"""

from __future__ import annotations

from spotgpu import tags
from spotgpu.bootstrap import AgentConfig, control_store_url, render_bootstrap
from spotgpu.models.gang import GangLaunch
from spotgpu.models.pools import GcpPoolSpec
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.gcp import plan


def labels(args: PoolArgs, role: str) -> dict[str, str]:
    """Base labels (environment, owner, managed-by) plus ``spotgpu-role`` and ``spotgpu-pool``."""
    values = {**args.base_tags, tags.ROLE: role, tags.POOL: args.spec.name}
    return {k: tags.gcp_label_value(v) for k, v in values.items()}


def pool_labels(args: PoolArgs) -> dict[str, str]:
    """Base labels plus ``spotgpu-pool``, for a pool resource that plays no linked role (the rendezvous host)."""
    values = {**args.base_tags, tags.POOL: args.spec.name}
    return {k: tags.gcp_label_value(v) for k, v in values.items()}


def waiver(spec: GcpPoolSpec) -> str | None:
    reasons = [
        f"{k}: {v}"
        for k, v in (("singleZone", spec.opt_out.single_zone), ("singleType", spec.opt_out.single_type))
        if v
    ]
    return "; ".join(reasons) or None


def spot_metadata(args: PoolArgs, spec: GcpPoolSpec, checkpoint_store: str, fallback_mig: str) -> dict[str, str]:
    """The full link map on a spot template (role spot-pool)."""
    return tags.pool_links(
        role="spot-pool",
        pool=spec.name,
        checkpoint_store=checkpoint_store,
        fallback_group=fallback_mig,
        ladder=args.ladder,
        workload=args.workload,
        checkpoint_interval_seconds=args.interval.seconds,
        notice=plan.notice_link(spec),
        waiver=waiver(spec),
        controller_waiver=tags.controller_waiver(spec.controller),
    )


def fallback_metadata(args: PoolArgs, spec: GcpPoolSpec, checkpoint_store: str) -> dict[str, str]:
    """Links on the on-demand template (role fallback, with the ladder that decides when it is used)."""
    return tags.pool_links(
        role="fallback",
        pool=spec.name,
        checkpoint_store=checkpoint_store,
        ladder=args.ladder,
        workload=args.workload,
        checkpoint_interval_seconds=args.interval.seconds,
    )


def startup_script(
    args: PoolArgs, spec: GcpPoolSpec, checkpoint_store: str, capacity_type: str, gang: GangLaunch | None = None
) -> str:
    """The one shared bootstrap renderer, configured for this pool's GCP notice contract."""
    config = AgentConfig(
        provider="gcp",
        pool=spec.name,
        capacity_type="spot" if capacity_type == "spot" else "on-demand",
        notice=spec.notice.model_dump(mode="json"),
        checkpoint_store=checkpoint_store,
        checkpoint_interval_seconds=args.interval.seconds,
        control_store=control_store_url(checkpoint_store),  # the controller's state prefix (its IAM condition)
    )
    return render_bootstrap(config, spec.agent_package, gang)
