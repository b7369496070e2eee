"""Google Cloud: Spot instance templates and the MIGs that use them; GCS checkpoint buckets."""

from __future__ import annotations

import re
from typing import Any

from spotgpu.models.notice import GcpNoticeContract
from spotgpu_guard.inventory import Inventory, Res, names_of
from spotgpu_guard.links import ROLE, links_of
from spotgpu_guard.model import Bootstrap, Gap, Group, SpotPool, Store
from spotgpu_guard.values import UNKNOWN, as_list, as_number, dig

TEMPLATES = (
    "gcp:compute/instanceTemplate:InstanceTemplate",
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
)
MIGS = (
    "gcp:compute/instanceGroupManager:InstanceGroupManager",
    "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager",
)
BUCKET = "gcp:storage/bucket:Bucket"

#: Accelerator-optimized families carry their GPUs in the machine type (A2, A3, A4, A4X, G2, G4).
_ACCELERATOR_OPTIMIZED = re.compile(r"^(?:a2|a3|a4|a4x|g2|g4)-")


def _is_spot(template: Res) -> Any:
    model = template.get("scheduling", "provisioningModel")
    preemptible = template.get("scheduling", "preemptible")
    if model == "SPOT" or preemptible is True:
        return True
    if model is UNKNOWN or preemptible is UNKNOWN:
        return UNKNOWN
    return False


def _gpu_types(template: Res) -> tuple[set[str], Any]:
    """(machine/accelerator type names, GPU present: True/False/UNKNOWN)."""
    machine = template.get("machineType")
    accelerators = [a for a in as_list(template.get("guestAccelerators")) if a is not UNKNOWN]
    accel_types = {t for a in accelerators if isinstance(t := dig(a, "type"), str)}
    gpu: Any = bool(accelerators) or (isinstance(machine, str) and bool(_ACCELERATOR_OPTIMIZED.match(machine)))
    if not gpu and (machine is UNKNOWN or template.get("guestAccelerators") is UNKNOWN):
        gpu = UNKNOWN
    names = {machine} if isinstance(machine, str) else set()
    return names | accel_types, gpu


def _migs_using(inv: Inventory, template: Res) -> list[Res]:
    names = names_of(template)
    out = []
    for mig in inv.of_type(*MIGS):
        refs = {dig(v, "instanceTemplate") for v in as_list(mig.get("versions"))}
        if template.urn in mig.deps_of("versions") or refs & names:
            out.append(mig)
    return out


def _templates_of(inv: Inventory, mig: Res) -> list[Res]:
    refs = {dig(v, "instanceTemplate") for v in as_list(mig.get("versions"))}
    linked = inv.linked(mig, "versions", TEMPLATES)
    return linked or [t for t in inv.of_type(*TEMPLATES) if names_of(t) & refs]


def _bootstrap(template: Res) -> Bootstrap:
    script = template.get("metadataStartupScript")
    if script is None:
        script = template.get("metadata", "startup-script")
        return Bootstrap(f"instance template {template.label()} metadata startup-script", script)
    return Bootstrap(f"instance template {template.label()} metadataStartupScript", script)


def _notice(template: Res, pool: SpotPool) -> None:
    seconds = template.get("scheduling", "preemptionNoticeDuration", "seconds")
    if seconds is UNKNOWN:
        pool.contract_problem = "scheduling.preemptionNoticeDuration is unknown until apply"
        pool.notice_gaps.append(Gap("scheduling.preemptionNoticeDuration.seconds is unknown until apply; "
                                    "fix: set it to the literal 120"))
        return
    value = as_number(seconds) or 0
    pool.contract = GcpNoticeContract(preemption_notice_seconds=120 if value == 120 else 0)
    if value != 120:
        pool.notice_gaps.append(Gap(
            f"it asks for a {value:g} s preemption notice, leaving at most 30 s of best-effort shutdown; fix: set "
            "scheduling.preemption_notice_duration={'seconds': 120}, or state a waiver under "
            "notice-handled.zeroNoticeWaivers in the policy config", waiver="zero-notice",
            stack_fix="set {pool}.notice.preemptionNoticeSeconds to 120 in the stack config, or state why 0 s is "
                      "acceptable under notice-handled.zeroNoticeWaivers.{name} in policy-config.json"))


def spot_pools(inv: Inventory) -> list[SpotPool]:
    pools = []
    for template in inv.of_type(*TEMPLATES):
        spot = _is_spot(template)
        types, gpu = _gpu_types(template)
        if spot is False or gpu is False:
            continue
        zones: set[str] = set()
        for mig in _migs_using(inv, template):
            zones |= {z for z in as_list(mig.get("distributionPolicyZones")) if isinstance(z, str)}
            if isinstance(zone := mig.get("zone"), str):
                zones.add(zone)
            for sel in as_list(mig.get("instanceFlexibilityPolicy", "instanceSelections")):
                types |= {t for t in as_list(dig(sel, "machineTypes")) if isinstance(t, str)}
        caveats = [c for c, bad in (("Spot model unknown until apply; judged as Spot", spot is UNKNOWN),
                                    ("GPUs unknown until apply; judged as GPU", gpu is UNKNOWN)) if bad]
        pool = SpotPool(template, "gcp", "Spot instance template", links_of(template), types, zones,
                        bootstraps=[_bootstrap(template)], caveat="; ".join(caveats))
        _notice(template, pool)
        pools.append(pool)
    return pools


def fallback_groups(inv: Inventory) -> list[Group]:
    groups = []
    for mig in inv.of_type(*MIGS):
        spots = [_is_spot(t) for t in _templates_of(inv, mig)]
        on_demand = None if UNKNOWN in spots or not spots else not any(spots)
        detail = "its instance template is Spot" if True in spots else (
            "its instance template is not in this stack" if not spots else "")
        groups.append(Group(mig, "gcp", "managed instance group", names_of(mig), on_demand, detail))
    return groups


def _bucket_gaps(bucket: Res) -> list[Gap]:
    gaps = []
    checks = (
        (bucket.get("versioning", "enabled") is True, "versioning is not enabled; fix: set versioning={'enabled': True}"),
        (bucket.get("uniformBucketLevelAccess") is True,
         "uniform bucket-level access is off, so object ACLs can expose checkpoints; fix: set "
         "uniform_bucket_level_access=True"),
        (bucket.get("publicAccessPrevention") == "enforced",
         "public access prevention is not enforced; fix: set public_access_prevention='enforced'"),
        (any(dig(r, "action", "type") == "AbortIncompleteMultipartUpload" for r in as_list(bucket.get("lifecycleRules"))),
         "incomplete multipart uploads are never cleaned up; fix: add a lifecycle rule {'action': {'type': "
         "'AbortIncompleteMultipartUpload'}, 'condition': {'age': 1}}"),
    )
    for ok, message in checks:
        if not ok:
            gaps.append(Gap(message))
    return gaps


def stores(inv: Inventory) -> list[Store]:
    return [
        Store(b, "gcp", "GCS bucket", names_of(b), _bucket_gaps(b), links_of(b).get(ROLE) == "checkpoint-store")
        for b in inv.of_type(BUCKET)
    ]
