"""The shipped prod stack shows checkpoint tiers at work (issue 33; issue 35, item 6).

``spotgpu preview --stack prod`` as a platform engineer runs it: every pool prints the local and the
store interval and the expected restore sources, in the text and in ``--json``, with no policy
finding and no dispute between the model and the replay; and every VM the pools boot (spot and
on-demand, on every cloud) mounts the local tier before its agent starts and knows both intervals.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from typing import Any

import pytest
from test_pool_economics import _cli

from spotgpu.agent.config import AgentConfig
from spotgpu.bootstrap_tier import TIER_UNIT
from spotgpu.economics.tiers import default_joint_loss, restore_mix

POOLS = ("train-aws", "train-gcp", "train-az")
#: Where each cloud's pool carries its boot script in the preview: (resource type, input path).
BOOT_DATA = {
    "aws:ec2/launchTemplate:LaunchTemplate": ("userData",),
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate": ("metadataStartupScript",),
    "azure-native:compute:VirtualMachineScaleSet": ("virtualMachineProfile", "osProfile", "customData"),
}


@functools.cache
def _preview(*extra: str) -> str:
    done = _cli("preview", "--stack", "prod", *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _document() -> dict[str, Any]:
    return dict(json.loads(_preview("--json")))


def _boot_script(resource: dict[str, Any]) -> str:
    value: Any = resource["inputs"]
    for key in BOOT_DATA[resource["type"]]:
        value = value[key]
    return str(value) if resource["type"].startswith("gcp:") else base64.b64decode(value).decode()


def test_every_prod_pool_previews_both_intervals_and_the_restore_mix() -> None:
    pools = _document()["economics"]["pools"]
    assert set(pools) == set(POOLS)
    text = _preview()
    for name in POOLS:
        tiers = pools[name]["checkpointTiers"]
        local, durable, every = tiers["localIntervalSeconds"], tiers["durableIntervalSeconds"], tiers["durableEvery"]
        assert every > 1 and durable == every * local and pools[name]["checkpointIntervalSeconds"] == local, name
        mix = tiers["restoreMix"]
        assert set(mix) == {"local", "peer", "store"} and sum(mix.values()) == pytest.approx(1, abs=1e-3), name
        # the shipped traces' figures for the 2-node gang spread over its 3 zones: a reclaim mostly takes the
        # whole gang, so most ranks restore from the store
        assert mix == restore_mix(default_joint_loss(2, 1, True)).as_dict() and tiers["peerCopies"] == 1, name
        assert mix["store"] > 0.5 and mix["local"] == pytest.approx(mix["peer"], abs=0.05), name
        percent = {k: f"{v:.0%}" for k, v in mix.items()}
        line = (f"tiers: local every {local} s (blocks {tiers['localWriteSeconds']:g} s), store every {durable} s "
                f"(every {every} local); restores expected from: local {percent['local']}, peer {percent['peer']}, "
                f"store {percent['store']}")  # fmt: skip
        block = text.split(f"  {name} (", 1)[1].split("\n  train-", 1)[0]
        assert line in block, (name, block[:600])


def test_the_prod_preview_is_clean_and_undisputed_with_the_tiers() -> None:
    doc = _document()
    assert doc["policy"]["violations"] == []
    assert "Policy verdicts:\n  no violations\n" in _preview()
    for name in POOLS:
        replay = doc["economics"]["pools"][name]["replay"]
        assert replay["status"] in ("agrees", "model only"), (name, replay["line"])
        assert doc["economics"]["pools"][name]["spotEligible"] and replay["pessimisticEligible"], name
    assert doc["economics"]["pools"]["train-aws"]["replay"]["status"] == "agrees"  # AWS traces ship


def test_every_prod_vm_mounts_the_local_tier_at_boot() -> None:
    doc = _document()
    durable = {n: p["checkpointTiers"]["durableIntervalSeconds"] for n, p in doc["economics"]["pools"].items()}
    booted: dict[str, int] = {}
    for resource in doc["resources"]:
        if resource["type"] not in BOOT_DATA:
            continue
        script = _boot_script(resource)
        pool = next(p for p in POOLS if resource["name"].startswith(p))
        assert re.search(rf"^systemctl enable --now {re.escape(TIER_UNIT)}", script, flags=re.M), resource["name"]
        body = script.split("<<'SPOTGPU_CONFIG'\n", 1)[1].split("\nSPOTGPU_CONFIG\n", 1)[0]
        tier = AgentConfig.model_validate(json.loads(body)).local_tier
        assert tier is not None, resource["name"]
        assert (tier.path, tier.keep, tier.peer_copies) == ("/var/lib/spotgpu/local", 2, 1)
        assert tier.durable_interval_seconds == durable[pool], resource["name"]
        booted[pool] = booted.get(pool, 0) + 1
    # spot and fallback: AWS two launch templates, GCP two instance templates, Azure three sizes and the fallback
    assert booted == {"train-aws": 2, "train-gcp": 2, "train-az": 4}


def test_the_prod_gcp_templates_request_the_local_ssds_their_types_come_with() -> None:
    templates = [r for r in _document()["resources"]
                 if r["type"] == "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"]  # fmt: skip
    assert len(templates) == 2  # the spot MIG's and the fallback's
    for template in templates:
        scratch = [d for d in template["inputs"]["disks"] if d.get("type") == "SCRATCH"]
        assert len(scratch) == 4 and {d["interface"] for d in scratch} == {"NVME"}, template["name"]


def test_the_docs_show_the_prod_preview_tier_lines_as_it_prints_them() -> None:
    """docs/economics.md quotes train-aws's verdict lines with the tiers: they are the preview's own."""
    from doc_blocks import block_after

    quoted = block_after("economics.md", "`spotgpu preview --stack prod` prints for `train-aws`", "text")
    lines = quoted.strip("\n").splitlines()
    assert len(lines) == 4 and "tiers: local every" in lines[1]
    assert "\n".join(lines) in _preview()
