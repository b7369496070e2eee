"""Pure planning for a Google Cloud spot GPU pool: what to create, decided without Pulumi resources.

The components only turn these decisions into resources, so every rule here is
tested directly (tests/gcp/test_gcp_plan.py). :func:`plan_pool` decides the whole pool
(a :class:`GcpPoolPlan`: names, links, bootstrap, rendezvous host, controller job)
before the component registers anything; what every cloud decides the same way comes
from :mod:`spotgpu_pulumi.planning`.

How machine choices become templates and MIGs (accelerator signature, and Local SSD count for a
tiered workload; the group holding the top-ranked choice is the primary spot MIG with
``capacity.target`` VMs, the others start at 0 and are what the ladder's ``alternate_sku`` step
resizes) is decided in the runtime's models layer, :mod:`spotgpu.models.gcp_groups`, because the
stack check, the economics and the rendered controller config read the same split: a rung is
priced with the types of the MIG it resizes. Mixing never silently drops or mis-equips a type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pulumi_gcp import compute, storage

from spotgpu.bootstrap import CONTROL_STORE_SUFFIX, control_store_url, render_bootstrap
from spotgpu.config import PlanError
from spotgpu.contract import tags
from spotgpu.contract.sources import GCP_SYSTEM_EVENT_LOG, gcp_method_filter
from spotgpu.models.base import FieldProblem
from spotgpu.models.gang import GangLaunch
from spotgpu.models.gcp_groups import MachineGroup, machine_groups
from spotgpu.models.pool_types import fallback_types
from spotgpu.models.pools import GcpPoolSpec
from spotgpu_pulumi import planning
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.gcp.controller_job import GcpControllerJobPlan, plan_gcp_controller_job
from spotgpu_pulumi.gcp.naming import PoolNames, check_name
from spotgpu_pulumi.gcp.rendezvous import GcpRendezvousPlan, plan_gcp_rendezvous

TargetShape = Literal["ANY", "BALANCED", "EVEN", "ANY_SINGLE_ZONE"]


def flexibility_policy(group: MachineGroup) -> compute.RegionInstanceGroupManagerInstanceFlexibilityPolicyArgsDict:
    """One selection per machine type, ranked 1..n (lower rank = preferred; names are the stable type names)."""
    return {
        "instance_selections": [
            {"name": t, "rank": i + 1, "machine_types": [t]} for i, t in enumerate(group.machine_types)
        ]
    }


def distribution_zones(spec: GcpPoolSpec) -> tuple[str, ...]:
    """The zones the regional MIGs spread over, in a stable order (the spec holds each once, and two or more
    unless the pool states why not; it also keeps an autoscaled pool at the EVEN or BALANCED shape)."""
    return tuple(sorted(spec.zones))


def redistribution_type(shape: TargetShape) -> str:
    """NONE except for EVEN: proactive rebalancing would delete running spot VMs to even out zones."""
    return "PROACTIVE" if shape == "EVEN" else "NONE"


def update_policy(shape: TargetShape) -> compute.RegionInstanceGroupManagerUpdatePolicyArgsDict:
    """Opportunistic: a template change never recreates a training VM mid-run; repairs pick it up."""
    return {
        "type": "OPPORTUNISTIC",
        "minimal_action": "REPLACE",
        "instance_redistribution_type": redistribution_type(shape),
    }


def lifecycle_policy() -> compute.RegionInstanceGroupManagerInstanceLifecyclePolicyArgsDict:
    """Repair preempted/failed VMs; a repair may move zones and uses the current template."""
    return {
        "default_action_on_failure": "REPAIR",
        "force_update_on_repair": "YES",
        "on_repair": {"allow_changing_zone": "YES"},
    }


def spot_scheduling(spec: GcpPoolSpec) -> compute.RegionInstanceTemplateSchedulingArgsDict:
    """Spot scheduling; the 120 s notice is set unless the pool explicitly chose 0 s (the policy flags that)."""
    scheduling: compute.RegionInstanceTemplateSchedulingArgsDict = {
        "provisioning_model": "SPOT",
        "preemptible": True,
        "automatic_restart": False,
        "on_host_maintenance": "TERMINATE",
        "instance_termination_action": spec.termination_action,
    }
    if spec.notice.preemption_notice_seconds:
        scheduling["preemption_notice_duration"] = {"seconds": spec.notice.preemption_notice_seconds}
    return scheduling


def on_demand_scheduling() -> compute.RegionInstanceTemplateSchedulingArgsDict:
    """Standard VMs with GPUs cannot live-migrate: TERMINATE on maintenance, restart afterwards."""
    return {
        "provisioning_model": "STANDARD",
        "preemptible": False,
        "automatic_restart": True,
        "on_host_maintenance": "TERMINATE",
    }


def notice_link(spec: GcpPoolSpec) -> str:
    """The ``spotgpu-notice`` value: ``gcp-120`` or ``gcp-0``."""
    return f"gcp-{spec.notice.preemption_notice_seconds}"


def labels(values: dict[str, str]) -> dict[str, str]:
    """Tags as GCP labels: values hold only ``[a-z0-9_-]{0,63}``, so each is encoded.

    The full link map (gs:// URLs, the encoded ladder and workload) does not fit a label;
    it rides in instance-template *metadata*, and labels carry the simple keys only.
    """
    return {key: tags.gcp_label_value(value) for key, value in values.items()}


def bucket_name_problem(name: str, at: str, fix: str) -> FieldProblem | None:
    """GCS refuses names containing ``google`` or starting with ``goog``: the finding at ``at``, if any."""
    if "google" in name or name.startswith("goog"):
        return FieldProblem("makes a bucket name that contains 'google' or starts with 'goog', which GCS refuses",
                            at=at, value=name, fix=fix)
    return None


def bucket_lifecycle_rules(keep_generations: int, noncurrent_days: int) -> list[storage.BucketLifecycleRuleArgsDict]:
    """Abort stale multipart uploads after 1 day; expire noncurrent versions after N days or K newer versions.

    ``send_*_if_zero`` is irrelevant for these values (all >= 1) but set explicitly so a
    future 0 is not silently dropped by the provider.
    """
    return [
        {"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": 1, "send_age_if_zero": True}},
        {
            "action": {"type": "Delete"},
            "condition": {
                "days_since_noncurrent_time": noncurrent_days,
                "send_days_since_noncurrent_time_if_zero": True,
                "with_state": "ARCHIVED",
            },
        },
        {
            "action": {"type": "Delete"},
            "condition": {
                "num_newer_versions": keep_generations,
                "send_num_newer_versions_if_zero": True,
                "with_state": "ARCHIVED",
            },
        },
    ]


def preemption_log_filter(project: str, spot_instance_prefix: str) -> str:
    """System-event audit entries for preemptions of this pool's spot VMs only.

    Audit entries carry no VM labels, so the pool is selected by the VM name prefix
    every spot MIG of the pool uses as its base instance name. The methods are the contract's
    (:data:`spotgpu.contract.sources.GCP_INTERRUPTIONS`), the ones the controller parses.
    """
    return " AND ".join(
        [
            f'logName="projects/{project}/logs/{GCP_SYSTEM_EVENT_LOG}"',
            'resource.type="gce_instance"',
            gcp_method_filter(),
            f'protoPayload.resourceName:"/instances/{spot_instance_prefix}"',
        ]
    )


#: What the fallback controller may do on the pool's MIGs: ``get`` covers get, listManagedInstances and
#: listErrors; ``update`` covers resize and deleteInstances (removing one drained VM by name).
CONTROLLER_MIG_PERMISSIONS = (
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.update",
)


def controller_mig_condition(project: str, region: str, mig_names: tuple[str, ...]) -> str:
    """IAM condition limiting the controller's custom role to exactly this pool's MIGs."""
    base = f"projects/{project}/regions/{region}/instanceGroupManagers/"
    return " || ".join(f'resource.name == "{base}{n}"' for n in mig_names)


def controller_state_condition(bucket: str, prefix: str) -> str:
    """IAM condition limiting the controller's object access to its state prefix (record, drains, agent commits)."""
    return f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}/{CONTROL_STORE_SUFFIX}/")'


@dataclass(frozen=True)
class GcpPoolPlan:
    """Every decision of one pool, made (and checked) before any resource exists."""

    #: what it was planned from
    args: PoolArgs
    spec: GcpPoolSpec
    names: PoolNames
    zones: tuple[str, ...]
    groups: tuple[MachineGroup, ...]
    spot_migs: tuple[str, ...]
    fallback_mig: str
    node_account_id: str
    controller_account_id: str
    bucket: str
    prefix: str
    checkpoint_store: str
    #: the controller's state URL: its IAM condition (:attr:`state_condition`) admits exactly this prefix
    control_store: str
    state_condition: str
    log_filter: str
    #: the full link map on each template (labels cannot hold it)
    spot_metadata: dict[str, str]
    fallback_metadata: dict[str, str]
    spot_startup_script: str
    fallback_startup_script: str
    base_tags: dict[str, str]
    #: a gang pool's rendezvous host (None: the pool runs no gang, and nothing of it exists)
    rendezvous: GcpRendezvousPlan | None
    #: the scheduled controller (None when ``controller.enabled`` is false)
    controller_job: GcpControllerJobPlan | None

    @property
    def pool(self) -> str:
        return self.spec.name

    def labels(self, role: str) -> dict[str, str]:
        """Base labels plus ``spotgpu-role`` and ``spotgpu-pool``."""
        return labels(planning.role_tags(self.base_tags, self.pool, role))

    def pool_labels(self) -> dict[str, str]:
        """Base labels plus ``spotgpu-pool``, for a pool resource that plays no linked role (the rendezvous host)."""
        return labels(planning.pool_tags(self.base_tags, self.pool))


def startup_script(args: PoolArgs, capacity_type: planning.CapacityType, store: str, gang: GangLaunch | None) -> str:
    """The one shared bootstrap renderer, with this pool's GCP notice contract (in the spec)."""
    return render_bootstrap(planning.agent_config(args, capacity_type, store), args.spec.agent_package, gang)


def plan_pool(args: PoolArgs) -> GcpPoolPlan:
    """The one GCP planning sequence: the component builds from it, ``spotgpu preview`` validates with it."""
    spec = planning.cloud_spec(args, GcpPoolSpec, "Google Cloud")
    try:
        return _plan(args, spec)
    except FieldProblem as problem:  # the checks below point at keys of the pool
        raise PlanError(problem, pool=spec.name) from None


def _plan(args: PoolArgs, spec: GcpPoolSpec) -> GcpPoolPlan:
    zones = distribution_zones(spec)
    groups = machine_groups(spec, args.workload)
    names = PoolNames(spec.project, spec.name, args.environment)

    def named(name: str, what: str) -> str:
        problem = check_name(name, what)
        if problem is not None:
            raise problem
        return name

    spot_migs = tuple(named(names.spot_mig(g.key), "MIG") for g in groups)
    fallback_mig = named(names.fallback_mig, "fallback MIG")
    bucket = names.bucket
    google = bucket_name_problem(bucket, "", "rename the pool, or use a project whose id has no 'google'")
    if google is not None:  # at the key that put it there: the project, the pool's name or the environment
        key = "project" if "goog" in spec.project else "name" if "google" in spec.name else None
        raise PlanError(google.below(key) if key else google.below("environment"), pool=spec.name if key else None)
    prefix = planning.checkpoint_prefix(spec)
    store = planning.store_url("gs", bucket, prefix)
    rendezvous = plan_gcp_rendezvous(spec, names.prefix, labels(planning.pool_tags(args.base_tags, spec.name)))
    gang = rendezvous.launch if rendezvous else None
    controller_job = None
    if spec.controller.enabled:
        controller_job = plan_gcp_controller_job(
            spec,
            args.workload,
            args.ladder,
            base_name=names.prefix,
            state_url=control_store_url(store),
            spot_migs=list(spot_migs),
            fallback_mig=fallback_mig,
            subscription=names.subscription,
            topic=names.topic,
            labels=labels(planning.role_tags(args.base_tags, spec.name, "controller")),
            group_types={
                **{mig: g.machine_types for g, mig in zip(groups, spot_migs, strict=True)},
                fallback_mig: fallback_types(spec, args.workload),
            },
        )
    return GcpPoolPlan(
        args=args,
        spec=spec,
        names=names,
        zones=zones,
        groups=groups,
        spot_migs=spot_migs,
        fallback_mig=fallback_mig,
        node_account_id=named(names.service_account_id("vm"), "service account"),
        controller_account_id=named(names.service_account_id("ctl"), "service account"),
        bucket=bucket,
        prefix=prefix,
        checkpoint_store=store,
        control_store=control_store_url(store),
        state_condition=controller_state_condition(bucket, prefix),
        log_filter=preemption_log_filter(spec.project, names.spot_base_instance_prefix),
        spot_metadata=planning.capacity_links(
            args, "spot-pool", store, notice=notice_link(spec), fallback_group=fallback_mig
        ),
        fallback_metadata=planning.capacity_links(args, "fallback", store),
        spot_startup_script=startup_script(args, "spot", store, gang),
        fallback_startup_script=startup_script(args, "on-demand", store, gang),
        base_tags=args.base_tags,
        rendezvous=rendezvous,
        controller_job=controller_job,
    )
