"""AWS compute: spot Auto Scaling groups, EC2 Fleets and launch templates, and fallback groups."""

from __future__ import annotations

import re
from typing import Any

from spotgpu.models.notice import AwsNoticeContract
from spotgpu_guard.inventory import Inventory, Res, names_of
from spotgpu_guard.links import ZONES, links_of
from spotgpu_guard.model import Bootstrap, Gap, Group, SpotPool
from spotgpu_guard.values import UNKNOWN, as_list, as_number, decode_bootstrap, dig

ASG = "aws:autoscaling/group:Group"
FLEET = "aws:ec2/fleet:Fleet"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
LIFECYCLE_HOOK = "aws:autoscaling/lifecycleHook:LifecycleHook"
SUBNET = "aws:ec2/subnet:Subnet"
#: GPU instance families (p2..p6, g3..g6e, gr6); wildcards like ``g5.*`` match too.
_GPU_TYPE = re.compile(r"^(?:p[2-9]|g[3-9]|gr\d)[a-z0-9-]*\.")
_TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"


def is_gpu_type(instance_type: Any) -> bool:
    return isinstance(instance_type, str) and bool(_GPU_TYPE.match(instance_type))


def _requirements_gpu(req: Any) -> bool:
    if not isinstance(req, dict):
        return False
    kinds = req.get("acceleratorTypes")
    if isinstance(kinds, list) and "gpu" in kinds:
        return True
    allowed = req.get("allowedInstanceTypes")
    return isinstance(allowed, list) and any(is_gpu_type(t) for t in allowed)


# ---- launch templates -------------------------------------------------------


def _lt_refs(inv: Inventory, res: Res, prop: str, specs: list[Any]) -> list[Res]:
    """Launch templates ``res`` uses: property dependency first, then id or name."""
    found = inv.linked(res, prop, [LAUNCH_TEMPLATE])
    if found:
        return found
    for spec in specs:
        for key in ("launchTemplateId", "launchTemplateName", "id", "name"):
            value = dig(spec, key)
            if isinstance(value, str):
                found += [lt for lt in inv.of_type(LAUNCH_TEMPLATE) if value in names_of(lt)]
    return found


def _asg_templates(inv: Inventory, asg: Res) -> list[Res]:
    if isinstance(asg.get("mixedInstancesPolicy"), dict):
        spec = asg.get("mixedInstancesPolicy", "launchTemplate", "launchTemplateSpecification")
        return _lt_refs(inv, asg, "mixedInstancesPolicy", [spec])
    return _lt_refs(inv, asg, "launchTemplate", [asg.get("launchTemplate")])


def _fleet_templates(inv: Inventory, fleet: Res) -> list[Res]:
    specs = [dig(c, "launchTemplateSpecification") for c in as_list(fleet.get("launchTemplateConfigs"))]
    return _lt_refs(inv, fleet, "launchTemplateConfigs", specs)


def _lt_is_spot(lt: Res) -> Any:
    market = lt.get("instanceMarketOptions", "marketType")
    return UNKNOWN if market is UNKNOWN else market == "spot"


def _lt_bootstrap(lt: Res) -> Bootstrap:
    return Bootstrap(f"launch template {lt.label()} userData", decode_bootstrap(lt.get("userData")))


def _imds_gap(lt: Res) -> Gap | None:
    tokens = lt.get("metadataOptions", "httpTokens")
    if tokens == "required":
        return None
    if tokens is UNKNOWN:
        return Gap(f"launch template {lt.label()} metadataOptions.httpTokens is unknown until apply; "
                   "fix: set it to the literal \"required\" (IMDSv2)")
    return Gap(f"launch template {lt.label()} does not require IMDSv2 (metadataOptions.httpTokens is "
               f"{tokens!r}); fix: set metadata_options={{'http_tokens': 'required'}}")


def _interruption(behavior: Any) -> tuple[AwsNoticeContract | None, str]:
    if behavior is UNKNOWN:
        return None, "the spot instance interruption behavior is unknown until apply"
    if behavior in ("terminate", "stop", "hibernate"):
        return AwsNoticeContract(interruption_behavior=behavior), ""
    return AwsNoticeContract(), ""


# ---- zones and types --------------------------------------------------------


def _zones_from_subnets(inv: Inventory, res: Res, prop: str, subnet_ids: list[Any]) -> tuple[set[str], str]:
    subnets = inv.linked(res, prop, [SUBNET])
    zones = {z for s in subnets if isinstance(z := s.get("availabilityZone"), str)}
    resolved = {n for s in subnets for n in names_of(s)}
    loose = {s for s in subnet_ids if isinstance(s, str) and s not in resolved}
    for sid in list(loose):
        match = [s for s in inv.of_type(SUBNET) if sid in names_of(s)]
        if match and isinstance(z := match[0].get("availabilityZone"), str):
            zones.add(z)
            loose.discard(sid)
    note = ""
    if loose:
        note = f"{len(loose)} subnet(s) outside this stack, each counted as its own zone"
        zones |= {f"subnet:{s}" for s in loose}
    return zones, note


def _named_zones(zones: set[str], links: Any) -> set[str]:
    """Subnets outside the stack name no zone; a ``spotgpu-zones`` link (the zones the stack gave them, as the
    components write it) names them, when it lists as many zones as there are such subnets."""
    loose = {z for z in zones if z.startswith("subnet:")}
    named = links.get(ZONES)
    if not loose or not isinstance(named, str):
        return zones
    listed = {z for z in named.split(",") if z}
    return (zones - loose) | listed if len(listed) >= len(loose) else zones


def _types(overrides: list[Any], templates: list[Res]) -> tuple[set[str], bool]:
    """(instance types named, any GPU seen) from overrides, requirements and templates."""
    types: set[str] = set()
    gpu = False
    for o in overrides:
        t = dig(o, "instanceType")
        if isinstance(t, str):
            types.add(t)
            gpu |= is_gpu_type(t)
        req = dig(o, "instanceRequirements")
        if _requirements_gpu(req):
            gpu = True
            types |= {t for t in as_list(dig(req, "allowedInstanceTypes")) if isinstance(t, str)}
    if not types:
        for lt in templates:
            t = lt.get("instanceType")
            if isinstance(t, str):
                types.add(t)
                gpu |= is_gpu_type(t)
            gpu |= _requirements_gpu(lt.get("instanceRequirements"))
    return types, gpu


# ---- pools --------------------------------------------------------------------


def _asg_spot(asg: Res, templates: list[Res]) -> Any:
    mip = asg.get("mixedInstancesPolicy")
    if mip is UNKNOWN:
        return UNKNOWN
    if isinstance(mip, dict):
        pct = dig(mip, "instancesDistribution", "onDemandPercentageAboveBaseCapacity")
        if pct is UNKNOWN:
            return UNKNOWN
        share = as_number(pct)  # the API default is 100 % on-demand
        return (100.0 if share is None else share) < 100
    spots = [_lt_is_spot(lt) for lt in templates]
    return UNKNOWN if UNKNOWN in spots else any(spots)


def _has_termination_hook(inv: Inventory, asg: Res) -> bool:
    for hook in as_list(asg.get("initialLifecycleHooks")):
        if dig(hook, "lifecycleTransition") == _TERMINATING:
            return True
    names = names_of(asg)
    for hook in inv.of_type(LIFECYCLE_HOOK):
        target = hook.get("autoscalingGroupName")
        if hook.get("lifecycleTransition") == _TERMINATING and (
            asg.urn in hook.deps_of("autoscalingGroupName") or (isinstance(target, str) and target in names)
        ):
            return True
    return False


def _asg_pool(inv: Inventory, asg: Res, templates: list[Res], spot: Any) -> SpotPool:
    overrides = as_list(asg.get("mixedInstancesPolicy", "launchTemplate", "overrides"))
    types, _ = _types(overrides, templates)
    ids = as_list(asg.get("vpcZoneIdentifiers"))
    zones = {z for z in as_list(asg.get("availabilityZones")) if isinstance(z, str)}
    note = ""
    links = links_of(asg)
    for lt in templates:
        links = links.merged_over(links_of(lt))
    if ids:
        sub_zones, note = _zones_from_subnets(inv, asg, "vpcZoneIdentifiers", ids)
        zones |= _named_zones(sub_zones, links)
    behaviors = [lt.get("instanceMarketOptions", "spotOptions", "instanceInterruptionBehavior") for lt in templates]
    contract, problem = _interruption(next((b for b in behaviors if b is not None), None))
    pool = SpotPool(asg, "aws", "Auto Scaling group", links, types, zones, note, contract=contract,
                    contract_problem=problem)
    pool.bootstraps = [_lt_bootstrap(lt) for lt in templates] or [
        Bootstrap("its launch template (none found in this stack)", None)
    ]
    rebalance = asg.get("capacityRebalance")
    if rebalance is UNKNOWN:
        pool.notice_gaps.append(Gap("capacityRebalance is unknown until apply; fix: set capacity_rebalance=True literally"))
    elif rebalance is not True:
        pool.notice_gaps.append(Gap("capacityRebalance is not enabled, so the group ignores rebalance "
                                    "recommendations; fix: set capacity_rebalance=True"))
    if not _has_termination_hook(inv, asg):
        pool.notice_gaps.append(Gap(
            "it has no termination lifecycle hook, so instances vanish before the agent drains them; fix: add "
            f"initial_lifecycle_hooks=[{{'name': 'spotgpu-drain', 'lifecycle_transition': '{_TERMINATING}'}}] "
            "or an aws.autoscaling.LifecycleHook for this group"))
    pool.notice_gaps += [g for lt in templates if (g := _imds_gap(lt))]
    if spot is UNKNOWN:
        pool.caveat = "spot share unknown until apply; judged as spot"
    return pool


def _fleet_pool(inv: Inventory, fleet: Res, templates: list[Res]) -> SpotPool:
    overrides = [o for c in as_list(fleet.get("launchTemplateConfigs")) for o in as_list(dig(c, "overrides"))]
    types, _ = _types(overrides, templates)
    zones = {z for o in overrides if isinstance(z := dig(o, "availabilityZone"), str)}
    subnet_ids = [dig(o, "subnetId") for o in overrides if dig(o, "availabilityZone") is None]
    sub_zones, note = _zones_from_subnets(inv, fleet, "launchTemplateConfigs", subnet_ids) if subnet_ids else (set(), "")
    links = links_of(fleet)
    for lt in templates:
        links = links.merged_over(links_of(lt))
    contract, problem = _interruption(fleet.get("spotOptions", "instanceInterruptionBehavior"))
    pool = SpotPool(fleet, "aws", "EC2 Fleet", links, types, zones | sub_zones, note, contract=contract,
                    contract_problem=problem)
    pool.bootstraps = [_lt_bootstrap(lt) for lt in templates] or [
        Bootstrap("its launch template (none found in this stack)", None)
    ]
    if fleet.get("type") != "instant":
        strategy = fleet.get("spotOptions", "maintenanceStrategies", "capacityRebalance", "replacementStrategy")
        if strategy is UNKNOWN:
            pool.notice_gaps.append(Gap("spotOptions.maintenanceStrategies.capacityRebalance is unknown until apply"))
        elif not isinstance(strategy, str):
            pool.notice_gaps.append(Gap(
                "it does not act on rebalance recommendations; fix: set spot_options.maintenance_strategies."
                "capacity_rebalance.replacement_strategy='launch-before-terminate' (termination_delay >= 120)"))
    pool.notice_gaps += [g for lt in templates if (g := _imds_gap(lt))]
    return pool


def _fleet_spot(fleet: Res) -> Any:
    spec = fleet.get("targetCapacitySpecification")
    if spec is UNKNOWN:
        return UNKNOWN
    kind = dig(spec, "defaultTargetCapacityType")
    spot_units = as_number(dig(spec, "spotTargetCapacity"))
    if kind is UNKNOWN:
        return UNKNOWN
    return kind == "spot" or (spot_units or 0) > 0


def spot_pools(inv: Inventory) -> list[SpotPool]:
    pools: list[SpotPool] = []
    used: set[str] = set()
    for asg in inv.of_type(ASG):
        templates = _asg_templates(inv, asg)
        used |= {lt.urn for lt in templates}
        spot = _asg_spot(asg, templates)
        types, gpu = _types(as_list(asg.get("mixedInstancesPolicy", "launchTemplate", "overrides")), templates)
        gpu_unknown = not types and any(lt.get("instanceType") is UNKNOWN for lt in templates)
        if spot is not False and (gpu or gpu_unknown):
            pools.append(_asg_pool(inv, asg, templates, spot))
    for fleet in inv.of_type(FLEET):
        templates = _fleet_templates(inv, fleet)
        used |= {lt.urn for lt in templates}
        overrides = [o for c in as_list(fleet.get("launchTemplateConfigs")) for o in as_list(dig(c, "overrides"))]
        _, gpu = _types(overrides, templates)
        if _fleet_spot(fleet) is not False and gpu:
            pools.append(_fleet_pool(inv, fleet, templates))
    for lt in inv.of_type(LAUNCH_TEMPLATE):
        gpu = is_gpu_type(lt.get("instanceType")) or _requirements_gpu(lt.get("instanceRequirements"))
        if lt.urn in used or _lt_is_spot(lt) is False or not gpu:
            continue
        contract, problem = _interruption(lt.get("instanceMarketOptions", "spotOptions", "instanceInterruptionBehavior"))
        pool = SpotPool(lt, "aws", "spot launch template", links_of(lt), {lt.get("instanceType")} - {None},
                        contract=contract, contract_problem=problem, bootstraps=[_lt_bootstrap(lt)])
        pool.notice_gaps += [g for g in [_imds_gap(lt)] if g]
        pools.append(pool)
    return pools


def fallback_groups(inv: Inventory) -> list[Group]:
    groups = []
    for asg in inv.of_type(ASG):
        spot = _asg_spot(asg, _asg_templates(inv, asg))
        on_demand = None if spot is UNKNOWN else not spot
        groups.append(Group(asg, "aws", "Auto Scaling group", names_of(asg), on_demand,
                            "it runs spot instances" if spot is True else ""))
    return groups
