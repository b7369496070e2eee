"""``checkpoint-tier-has-disk``: a tiered workload on a type with neither local NVMe nor room for its RAM disk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import raw_resources as raw
from guard_helpers import by_policy, judge

from spotgpu.contract.tags import WORKLOAD, encode_workload

RULE = "checkpoint-tier-has-disk"


def tiered(keep: int = 1, peers: int = 1) -> str:
    """The raw workload (2 GB checkpoint, one node) with checkpoint tiers on two nodes, as its tag carries them."""
    profile = raw.WORKLOAD.model_copy(update={"nodes": 2})
    profile = profile.model_validate({**profile.model_dump(by_alias=True),
                                      "checkpointTiers": {"local": {"keep": keep}, "peerCopies": peers}})  # fmt: skip
    return encode_workload(profile)


def messages(program: Callable[[], Any]) -> list[str]:
    return [d["message"] for d in by_policy(judge(program), RULE)]


def test_types_with_local_nvme_hold_the_tier() -> None:
    # g5.xlarge and g6.xlarge: instance store NVMe (250 GB each, DescribeInstanceTypes)
    assert messages(lambda: raw.aws_pool(tags={WORKLOAD: tiered()})) == []
    # Azure NC A100 v4 / NCads H100 v5: NVMe temp disks
    assert messages(lambda: raw.azure_pool(tags={WORKLOAD: tiered()})) == []


def test_a_type_without_nvme_holds_a_small_ram_disk() -> None:
    # g2-standard-8/12 have no local SSD; a 3 GiB RAM disk fits 32 and 48 GiB of memory
    assert messages(lambda: raw.gcp_pool(tags={WORKLOAD: tiered()})) == []


def test_a_type_with_neither_is_named_with_the_reason_and_the_fix() -> None:
    """10 GB per node, 2 kept + 1 written + 1 durable generations of its own shard and one peer's: a 75 GiB RAM
    disk, more than half of g2-standard-8's 32 GiB, less than half of g2-standard-48's 192 GiB."""
    big = raw.WORKLOAD.model_copy(update={"nodes": 4})
    text = encode_workload(big.model_validate({**big.model_dump(by_alias=True), "checkpointBytes": 40_000_000_000,
                                               "checkpointTiers": {"local": {"keep": 2}, "peerCopies": 1}}))  # fmt: skip
    found = messages(lambda: raw.gcp_pool(tags={WORKLOAD: text}, types=["g2-standard-8", "g2-standard-48"]))
    assert len(found) == 1
    assert "g2-standard-8 has nowhere for the workload's local checkpoint tier" in found[0]
    assert "no local NVMe, and a 75 GiB RAM disk is more than 50% of its 32 GiB memory" in found[0]
    assert "fix: drop g2-standard-8" in found[0]


def test_a_workload_without_tiers_is_not_judged() -> None:
    assert messages(lambda: raw.gcp_pool(types=["g2-standard-4"])) == []


def test_the_older_aws_families_say_what_they_hold() -> None:
    """Audit of issue 33: the hand-entered rows (g3, g4ad, p2, p3) had no local NVMe or memory, so g4ad (an
    NVMe instance store) and p3 (room for a RAM disk) were both judged to have neither."""
    assert messages(lambda: raw.aws_pool(tags={WORKLOAD: tiered()}, types=["g4ad.xlarge", "p3.2xlarge"])) == []
    # no NVMe: the small RAM disk is judged against its real 30.5 GiB (it was "host memory unknown")
    assert messages(lambda: raw.aws_pool(tags={WORKLOAD: tiered()}, types=["g3s.xlarge"])) == []
