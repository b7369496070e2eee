"""``checkpoint-tier-has-disk`` (advisory): a tiered workload lands on types that can hold its local tier.

A workload with checkpoint tiers (the ``L=`` block of the ``spotgpu-workload`` link,
:func:`spotgpu.contract.tags.encode_tiers`) commits every periodic save to each VM's local tier: the
type's local NVMe, or a RAM disk of the link's size where it has none. A type with neither
(no local NVMe, and a RAM disk that would take more than half its memory) leaves the tier
without a home: the RAM disk starves the job, or the save falls back to the object store's
speed. The judgement is :func:`spotgpu.models.tiers.tier_medium` on the GPU catalogue's
``local_storage``; a type the catalogue does not know is left to ``gpu-types-known``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu import catalogue
from spotgpu.models.tiers import RAM_DISK_MAX_SHARE, tier_medium
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.links import WORKLOAD, read_workload_profile
from spotgpu_guard.rule import Finding, stack_rule
from spotgpu_guard.stack_keys import restate


def check_tier_disk(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    from spotgpu.models.tiers import ram_disk_gib

    for pool in catalog.pools:
        profile = read_workload_profile(pool.links).value  # a malformed tag: spot-eligible reports it
        tiers = None if profile is None else profile.checkpoint_tiers
        if profile is None or tiers is None:
            continue
        ram = ram_disk_gib(tiers, profile.checkpoint_bytes, profile.nodes)
        for name in sorted(pool.gpu_types):
            storage = catalogue.local_storage(pool.cloud, name)
            if storage is None:
                continue
            medium, why = tier_medium(storage, ram)
            if medium is None:
                yield Finding(pool.res.urn, restate(
                    f"{pool.describe()}: {name} has nowhere for the workload's local checkpoint tier ({WORKLOAD} "
                    f"L=...): {why}; fix: drop {name}, use a type with local NVMe, or lower the tier's RAM disk "
                    f"(fewer kept generations or peer copies) to at most {RAM_DISK_MAX_SHARE:.0%} of its memory",
                    pool.res, pool.links, f"drop {name} from {{pool}}'s types (or pick one with local NVMe), or "
                    "lower checkpointTiers.local.keep / peerCopies of the workload {pool}.workload names"))  # fmt: skip


RULES = [
    stack_rule(
        "checkpoint-tier-has-disk",
        "A workload with checkpoint tiers runs on types with local NVMe or room for its RAM disk.",
        EnforcementLevel.ADVISORY,
        check_tier_disk,
        remediation="Use types with local NVMe, or shrink the local tier (checkpointTiers.local.keep, peerCopies)",
    ),
]
