"""Pure planning for an Azure spot GPU pool: what to create, decided before any resource exists.

The component classes only turn an :class:`AzurePoolPlan` into resources. Everything
that can be wrong with a spec (a combination ARM would refuse, or one that
would silently cost money) is rejected here with a message naming the field,
the value and the fix, so a bad stack fails at ``pulumi preview`` and not
half-way through ``pulumi up``.

Rules and why (see docs/azure.md):

* one Flexible scale set per GPU size: instance mix (``skuProfile``) supports only
  the A, B, D, E and F families, so GPU sizes cannot share a scale set;
* ``platformFaultDomainCount`` 1: N-series sizes in a Flexible scale set need it,
  and zonal scale sets allow no more;
* a priority mix needs ``singlePlacementGroup`` false;
* no Spot on B-series or Promo sizes (ARM: AzureSpotIsNotSupportedForThisVMSize; the spec refuses
  every family but N);
* ``singlePlacementGroup`` true caps a scale set at 100 VMs.

What every cloud decides the same way (prefix, store URL, link tags, waiver text,
agent config) comes from :mod:`spotgpu_pulumi.planning`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from spotgpu.bootstrap import control_store_url, render_bootstrap_b64
from spotgpu.config import PlanError
from spotgpu.contract import tags
from spotgpu.models.base import FieldProblem
from spotgpu.models.pool_types import spot_groups
from spotgpu.models.pools import AzurePoolSpec
from spotgpu.models.refs import Ref
from spotgpu_pulumi import planning
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.azure import naming
from spotgpu_pulumi.azure.roles import RolePlan, plan_roles

if TYPE_CHECKING:
    from spotgpu.models.gang import GangLaunch
    from spotgpu_pulumi.azure.rendezvous import AzureRendezvousPlan

#: GPU families (N-series): NC (compute), ND (training), NV (visualisation), NG (gaming/VDI).
GPU_FAMILIES = ("NC", "ND", "NV", "NG")
MAX_TAG_VALUE = 256
SINGLE_PLACEMENT_GROUP_LIMIT = 100


@dataclass(frozen=True)
class VmSize:
    """A parsed ARM size name such as ``Standard_NC24ads_A100_v4``."""

    name: str
    family: str
    vcpus: int

    @property
    def is_gpu(self) -> bool:
        return self.family in GPU_FAMILIES

    @property
    def is_promo(self) -> bool:
        return self.name.lower().endswith("_promo")


_SIZE = re.compile(r"^Standard_([A-Z]+)([0-9]+)[a-z]*(?:_[A-Za-z0-9]+)*$")


def parse_vm_size(name: str, at: str) -> VmSize:
    m = _SIZE.match(name)
    if not m:
        raise FieldProblem("is not an Azure size name", at=at, value=name,
                           fix="use the ARM form such as Standard_NC24ads_A100_v4")
    return VmSize(name=name, family=m.group(1), vcpus=int(m.group(2)))


def check_spot_sizes(sizes: tuple[str, ...], field: str = "vmSizes") -> list[VmSize]:
    """Every size must be a GPU (N-series) size Spot supports, listed once (a :class:`FieldProblem` says which not).

    The spec's catalogue check refuses sizes of other families (B-series among them, which Spot does not
    support); a size the catalogue does not know yet (``optOut.catalogue``) is judged here by its name.
    """
    parsed = []
    seen: dict[str, str] = {}
    for i, name in enumerate(sizes):
        at = f"{field}[{i}]" if field == "vmSizes" else field
        size = parse_vm_size(name, at)
        if size.is_promo:
            raise FieldProblem("is a Promo size, which Azure Spot does not support", at=at, value=name,
                               fix="drop _Promo")
        if not size.is_gpu:
            raise FieldProblem(f"is a {size.family}-series size without GPUs", at=at, value=name,
                               fix=f"use an N-series size ({', '.join(GPU_FAMILIES)}), e.g. Standard_NC24ads_A100_v4")
        key = naming.size_key(name)
        if key in seen:
            raise FieldProblem(f"is the same size as {seen[key]!r}", at=at, value=name, fix="list each size once")
        seen[key] = name
        parsed.append(size)
    return parsed


def check_placement(spec: AzurePoolSpec, sizes: list[VmSize]) -> None:
    """Fault domains, placement groups and priority mix: the combinations ARM refuses."""
    fd = spec.platform_fault_domain_count
    if fd > 1:
        gpu = next((s.name for s in sizes if s.is_gpu), sizes[0].name)
        raise FieldProblem(
            f"is above 1 with N-series size {gpu}: GPU sizes in a Flexible scale set need 1 (and zonal scale sets "
            "allow at most 1)", at="platformFaultDomainCount", value=fd, fix="set platformFaultDomainCount: 1",
        )
    if spec.single_placement_group and spec.priority_mix is not None:
        raise FieldProblem(
            "is true with a priorityMix: Azure allows a Spot priority mix only without a single placement group",
            at="singlePlacementGroup", value=True, fix="set singlePlacementGroup: false or drop priorityMix",
        )
    if spec.single_placement_group and spec.capacity.max > SINGLE_PLACEMENT_GROUP_LIMIT:
        raise FieldProblem(
            f"is above {SINGLE_PLACEMENT_GROUP_LIMIT} with singlePlacementGroup true: one placement group holds at "
            f"most {SINGLE_PLACEMENT_GROUP_LIMIT} VMs", at="capacity.max", value=spec.capacity.max,
            fix=f"set singlePlacementGroup: false or capacity.max <= {SINGLE_PLACEMENT_GROUP_LIMIT}",
        )


@dataclass(frozen=True)
class ZonePlan:
    zones: tuple[str, ...]
    #: False when zone-spanning: a strict balance would refuse Spot capacity that exists
    #: in only some zones; None for one zone (ARM accepts zoneBalance only with >1 zone).
    zone_balance: bool | None


def plan_zones(zones: tuple[str, ...]) -> ZonePlan:
    """The spec's zones (each once, as ``AzurePoolSpec`` holds them) in a stable order."""
    ordered = tuple(sorted(zones))
    return ZonePlan(ordered, False if len(ordered) > 1 else None)


def check_tag_values(tag_map: dict[str, str], resource: str) -> dict[str, str]:
    for key, value in tag_map.items():
        if len(value) > MAX_TAG_VALUE:
            raise FieldProblem(
                f"makes tag {key} on {resource} {len(value)} characters, over Azure's {MAX_TAG_VALUE}",
                value=value, fix="shorten the ladder or the pool/account names",
            )
    return tag_map


@dataclass(frozen=True)
class ScaleSetPlan:
    """One scale set: a GPU size, its stable key, name, hostname prefix and start capacity."""

    key: str
    vm_size: str
    name: str
    computer_name_prefix: str
    capacity: int
    tags: dict[str, str]


@dataclass(frozen=True)
class StoragePlan:
    account: str
    container: str
    prefix: str
    url: str
    sku: str
    version_days: int
    protect: bool
    tags: dict[str, str]


@dataclass(frozen=True)
class EventsPlan:
    """Where the pool's Scheduled Events go for the controller (``publishEventsToEventGrid``).

    The scale sets publish to the subscription's ``MaintenanceResources`` system topic; an
    Event Grid subscription on it sends this resource group's ``ScheduledEventEmitted`` events
    to a Storage queue in the pool's account, which the controller reads (``eventsQueueUrl``).
    """

    queue: str
    queue_url: str
    system_topic: str
    subscription: str
    #: the topic's resource group (the pool's own when it creates the topic)
    topic_resource_group: Ref = ""
    #: None: this pool creates the topic. Else the existing topic's identity (a principal id), which
    #: gets this pool's queue: named in ``scheduledEventsTopic``, or an earlier pool's of the stack (:func:`share_topic`)
    topic_principal: Ref | None = None

    @property
    def creates_topic(self) -> bool:
        return self.topic_principal is None


@dataclass(frozen=True)
class AzurePoolPlan:
    #: what it was planned from (the workload and ladder the controller's config is rendered from)
    args: PoolArgs
    spec: AzurePoolSpec
    pool: str
    environment: str
    #: the resource group's name, or the Output of it given in the spec (passed through, never resolved here)
    resource_group: Ref
    location: str
    zones: ZonePlan
    spot: tuple[ScaleSetPlan, ...]
    fallback: ScaleSetPlan
    fallback_max: int
    storage: StoragePlan
    #: the controller's state URL, next to the checkpoints
    control_store: str
    #: base64 bootstrap of the spot and the on-demand VMs (only the agent's capacityType differs)
    spot_custom_data: str
    fallback_custom_data: str
    pool_identity: str
    controller_identity: str
    identity_tags: dict[str, str]
    controller_tags: dict[str, str]
    #: the custom roles and scoped grants of the pool's and the controller's identities
    roles: RolePlan
    #: a gang pool's rendezvous host (spotgpu_pulumi.azure.rendezvous); None renders the pool as before
    rendezvous: AzureRendezvousPlan | None
    #: the Scheduled Events route to the controller; None without publishEventsToEventGrid
    events: EventsPlan | None = None
    #: lines the component logs as warnings (:func:`eviction_warnings`), each naming a key, its value and the fix
    warnings: tuple[str, ...] = ()

    @property
    def checkpoint_store(self) -> str:
        """The ``az://account/container/prefix`` URL the pool exports and its agents write to."""
        return self.storage.url


def custom_data(args: PoolArgs, capacity_type: planning.CapacityType, store: str, gang: GangLaunch | None) -> str:
    """Base64 bootstrap from the one renderer every cloud uses (decoded size <= 64 KB, checked there).

    The VM has a single user-assigned identity, so the agent's
    ``ManagedIdentityCredential()`` needs no client id to reach the checkpoint store.
    """
    return render_bootstrap_b64(planning.agent_config(args, capacity_type, store), args.spec.agent_package, gang)


def eviction_warnings(spec: AzurePoolSpec) -> tuple[str, ...]:
    """A warning when the pool's evictions would reach the controller only through the VM list.

    Under ``evictionPolicy: Delete`` an evicted VM leaves the list within seconds, so a tick sees
    the eviction only if it lands while the VM shows "deleting": most evictions then go unrecorded
    (the lost capacity is still seen and replaced; the interruption counts, per-zone rates and
    latency clocks are what is lost). ``publishEventsToEventGrid`` is off by default because it
    creates (or joins) the subscription's one Scheduled Events system topic, whose owner stack's
    lifetime every other stack's route then depends on; so the default warns, and writing the key
    (``true`` or ``false``) is the decision that silences it. ``Deallocate`` keeps the evicted VM
    listed, so its evictions are read reliably.
    """
    if spec.eviction_policy != "Delete" or "publish_events_to_event_grid" in spec.model_fields_set:
        return ()
    return (
        f"pools[{spec.name}].publishEventsToEventGrid: not set with evictionPolicy Delete, so the controller reads "
        "evictions from the VM list, which an evicted VM leaves within seconds, and records few of them "
        "(value: false, the default); fix: set it to true (one Scheduled Events topic per subscription: a pool of "
        "another stack names it in scheduledEventsTopic), or to false to accept this, or use evictionPolicy Deallocate",
    )


def plan_pool(args: PoolArgs) -> AzurePoolPlan:
    """Judge the pool and decide every name, tag, capacity, role and bootstrap of it.

    A rejection is a :class:`~spotgpu.config.PlanError` at the pool's key; nothing is registered.
    """
    spec = planning.cloud_spec(args, AzurePoolSpec, "Azure")
    try:
        return _plan(args, spec)
    except FieldProblem as problem:  # the checks below point at keys of the pool
        raise PlanError(problem, pool=spec.name) from None


def _plan(args: PoolArgs, spec: AzurePoolSpec) -> AzurePoolPlan:
    sizes = check_spot_sizes(spec.vm_sizes)
    fallback_size = spec.fallback_vm_size or spec.vm_sizes[0]
    check_spot_sizes((fallback_size,), field="fallbackVmSize")
    check_placement(spec, sizes)
    zones = plan_zones(spec.zones)
    account = spec.storage_account_name
    refused = naming.storage_account_problem(account)
    if refused is not None:
        raise refused

    pool, env, base_tags = spec.name, args.environment, args.base_tags
    prefix = planning.checkpoint_prefix(spec)
    url = naming.checkpoint_store_url(account, naming.CHECKPOINT_CONTAINER, prefix)
    fallback_name = naming.fallback_scale_set_name(pool, env)

    spot_tags = {
        **base_tags,
        **planning.capacity_links(args, "spot-pool", url, notice="azure", fallback_group=fallback_name),
    }
    capacity = {g.types[0]: g.start for g in spot_groups(spec, args.workload)}  # one size per scale set
    spot = []
    names: dict[str, str] = {}
    for i, size in enumerate(spec.vm_sizes):
        name = naming.scale_set_name(pool, env, size)
        if name in names:
            raise FieldProblem(f"makes scale set name {name}, as {names[name]!r} does", at=f"vmSizes[{i}]",
                               value=size, fix="list each size once")
        names[name] = size
        spot.append(
            ScaleSetPlan(
                key=naming.size_key(size),
                vm_size=size,
                name=name,
                computer_name_prefix=naming.computer_name_prefix(pool, size, "spot"),
                capacity=capacity[size],
                tags=check_tag_values(dict(spot_tags), name),
            )
        )
    fallback_tags = {**base_tags, **planning.capacity_links(args, "fallback", url)}
    fallback = ScaleSetPlan(
        key="ondemand",
        vm_size=fallback_size,
        name=fallback_name,
        computer_name_prefix=naming.computer_name_prefix(pool, fallback_size, "on-demand"),
        capacity=0,
        tags=check_tag_values(fallback_tags, fallback_name),
    )
    storage = StoragePlan(
        account=account,
        container=naming.CHECKPOINT_CONTAINER,
        prefix=prefix,
        url=url,
        sku=spec.storage_sku,
        version_days=spec.checkpoint.noncurrent_version_days,
        protect=not spec.checkpoint.force_destroy,
        tags=check_tag_values(
            {**base_tags, **tags.pool_links(role="checkpoint-store", pool=pool, checkpoint_store=url)}, account
        ),
    )
    rendezvous = None
    if spec.gang is not None:  # imported here: it builds with the network SDK, which a plain pool never loads
        from spotgpu_pulumi.azure.rendezvous import plan_azure_rendezvous

        rendezvous = plan_azure_rendezvous(spec, env, planning.pool_tags(base_tags, pool))
    gang = rendezvous.launch if rendezvous is not None else None  # a gang pool's VMs start the launch
    events = None
    if spec.publish_events_to_event_grid:
        topic, subscription = naming.events_names(pool, env)
        events = EventsPlan(
            naming.EVENTS_QUEUE, naming.events_queue_url(account), topic, subscription, spec.resource_group_name
        )
        if (shared := spec.scheduled_events_topic) is not None:
            events = replace(
                events,
                system_topic=shared.name,
                topic_resource_group=shared.resource_group,
                topic_principal=shared.principal_id,
            )
    return AzurePoolPlan(
        args=args,
        spec=spec,
        pool=pool,
        environment=env,
        resource_group=spec.resource_group_name,
        location=spec.location,
        zones=zones,
        spot=tuple(spot),
        fallback=fallback,
        fallback_max=spec.capacity.fallback_limit,
        storage=storage,
        control_store=control_store_url(url),
        spot_custom_data=custom_data(args, "spot", url, gang),
        fallback_custom_data=custom_data(args, "on-demand", url, gang),
        pool_identity=naming.identity_name(pool, env, "pool"),
        controller_identity=naming.identity_name(pool, env, "controller"),
        identity_tags=planning.pool_tags(base_tags, pool),
        controller_tags=planning.role_tags(base_tags, pool, "controller"),
        roles=plan_roles(
            pool=pool,
            environment=env,
            resource_group=spec.resource_group_name,
            account=account,
            container=naming.CHECKPOINT_CONTAINER,
            scale_sets={s.key: s.name for s in (*spot, fallback)},
            events_queue=events.queue if events is not None else None,
        ),
        rendezvous=rendezvous,
        events=events,
        warnings=eviction_warnings(spec),
    )


@dataclass(frozen=True)
class EventsTopic:
    """A Scheduled Events system topic a pool of this program created: what another pool subscribes with."""

    resource_group: Ref
    name: str
    #: the topic's system identity (an Output once built)
    principal_id: Ref


def share_topic(plan: AzurePoolPlan, topic: EventsTopic | None) -> AzurePoolPlan:
    """``plan`` on ``topic`` when it would otherwise create a second one: Azure allows one
    ``MaintenanceResources`` system topic per subscription, and a stack's pools share one."""
    if plan.events is None or not plan.events.creates_topic or topic is None:
        return plan
    events = replace(
        plan.events,
        system_topic=topic.name,
        topic_resource_group=topic.resource_group,
        topic_principal=topic.principal_id,
    )
    return replace(plan, events=events)

