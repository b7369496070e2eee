"""A tiered workload's pools provide the local tier on every cloud (issue 33, item 4).

Every pool's bootstrap installs the boot-time mount (``spotgpu-local-tier.service``: local NVMe,
else a RAM disk sized from the workload's state) and names the tier in the agent config; GCP's
templates request the Local SSDs A2 Ultra / A3 types come with. A workload without tiers plans
exactly as before. The mount script itself runs in tests/agent/test_local_tier_script.py.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from cloud_fixtures import REPO, SHIPPED, stack_raw

from spotgpu.agent.config import AgentConfig
from spotgpu.bootstrap_tier import TIER_UNIT
from spotgpu.config import parse_stack_config
from spotgpu.models.tiers import ram_disk_gib
from spotgpu_pulumi.args import PoolArgs
from spotgpu_pulumi.clouds import CLOUDS

TIERS = {"local": {"keep": 2}, "peerCopies": 1}


def tiered_args(cloud: str, tiers: dict[str, Any] | None = TIERS, **changes: Any) -> PoolArgs:
    raw = stack_raw("prod")
    if tiers is None:
        raw["workloads"]["llm-finetune"].pop("checkpointTiers", None)
    else:
        raw["workloads"]["llm-finetune"]["checkpointTiers"] = tiers
    raw["pools"] = [{**next(p for p in raw["pools"] if p["cloud"] == cloud), **changes}]
    config = parse_stack_config(raw, project_dir=str(REPO))
    return PoolArgs.for_pool(config, config.pools[0])


def scripts(cloud: str, args: PoolArgs) -> list[str]:
    plan = CLOUDS[cloud].plan(args)
    if cloud == "gcp":
        return [plan.spot_startup_script, plan.fallback_startup_script]
    encoded = [plan.spot_user_data, plan.fallback_user_data] if cloud == "aws" else [plan.spot_custom_data,
                                                                                    plan.fallback_custom_data]
    return [base64.b64decode(text).decode() for text in encoded]


def agent_config(script: str) -> AgentConfig:
    body = script.split("<<'SPOTGPU_CONFIG'\n", 1)[1].split("\nSPOTGPU_CONFIG\n", 1)[0]
    return AgentConfig.model_validate(json.loads(body))


@pytest.mark.parametrize("cloud", SHIPPED)
def test_every_bootstrap_mounts_the_tier_before_the_agent_and_names_it_in_the_agent_config(cloud: str) -> None:
    args = tiered_args(cloud)
    assert args.interval.tiers is not None
    for script in scripts(cloud, args):
        tier = agent_config(script).local_tier
        assert tier is not None
        assert tier.path == "/var/lib/spotgpu/local" and tier.keep == 2 and tier.peer_copies == 1
        assert tier.durable_interval_seconds == args.interval.tiers.durable_seconds
        ram = ram_disk_gib(args.workload.checkpoint_tiers, args.workload.checkpoint_bytes, args.workload.nodes)  # type: ignore[arg-type]
        assert tier.ram_disk_gib == ram == 224  # (2 kept + 1 written + 1 durable) x (own + 1 peer) x 30 GB, in GiB
        assert f"size={ram}G" in script  # the RAM disk where the type has no NVMe
        assert f"systemctl enable --now {TIER_UNIT}" in script
        # the tier is mounted before the agent starts, and at every boot (its unit), not only once
        assert script.index(f"enable --now {TIER_UNIT}") < script.index("enable --now spotgpu-agent.service")
        assert re.search(r"^Before=spotgpu-agent.service", script, flags=re.M)
        assert "WantedBy=multi-user.target" in script.split(TIER_UNIT, 2)[1]


@pytest.mark.parametrize("cloud", SHIPPED)
def test_without_tiers_the_bootstrap_has_no_tier(cloud: str) -> None:
    for script in scripts(cloud, tiered_args(cloud, tiers=None)):
        assert TIER_UNIT not in script and agent_config(script).local_tier is None


def test_each_cloud_looks_for_its_own_local_disks() -> None:
    aws, gcp, azure = (scripts(c, tiered_args(c))[0] for c in ("aws", "gcp", "azure"))
    assert "'Amazon EC2 NVMe Instance Storage'*" in aws and "google-local" not in aws
    assert "disk/by-id/google-local-nvme-ssd-*" in gcp and "Amazon" not in gcp
    assert "'Microsoft NVMe Direct Disk'*" in azure


def test_a_gang_pool_gives_the_job_the_tier_path_and_waits_for_the_mount() -> None:
    args = tiered_args("aws", agentPackage="spotgpu[aws,torch]==0.1.0",
                       gang={"command": ["/opt/job/train.py"], "nodes": 2,
                             "rendezvous": {"vpcId": "vpc-0abc", "privateIp": "10.0.1.10"}})
    [unit] = re.findall(r"cat > /etc/systemd/system/spotgpu-gang.service <<'SPOTGPU_UNIT'\n(.*?)SPOTGPU_UNIT",
                        scripts("aws", args)[0], flags=re.S)
    assert "Environment=SPOTGPU_LOCAL_DIR=/var/lib/spotgpu/local" in unit
    assert f"After=spotgpu-agent.service {TIER_UNIT}" in unit


MIXED_SSDS = [{"machineType": "a2-highgpu-4g"}, {"machineType": "g2-standard-48"}, {"machineType": "a3-highgpu-4g"}]
#: the prod ladder has no alternate_sku rung, the only one that grows the split-off A3 MIG
KEEP_IDLE = {"idleRungs": "the A3 MIG is resized by hand in this test"}


def test_gcp_requests_the_local_ssds_its_types_come_with_one_group_per_count() -> None:
    """a3-highgpu-4g comes with 8 Local SSDs, a2-highgpu-4g and g2-standard-48 with none: disks in a
    template apply to every VM, so the A3 type gets its own group and template."""
    plan = CLOUDS["gcp"].plan(tiered_args("gcp", machineTypes=MIXED_SSDS, optOut=KEEP_IDLE))
    shapes = {g.key: (g.machine_types, g.local_ssds) for g in plan.groups}
    assert shapes == {"aopt": (("a2-highgpu-4g", "g2-standard-48"), 0), "aopt-lssd8": (("a3-highgpu-4g",), 8)}
    untiered = CLOUDS["gcp"].plan(tiered_args("gcp", tiers=None, machineTypes=MIXED_SSDS))
    assert [(g.key, g.local_ssds) for g in untiered.groups] == [("aopt", 0)]  # unchanged without tiers


def test_the_shipped_gcp_pool_is_one_mig_whose_types_all_come_with_4_local_ssds() -> None:
    """The prod stack's train-gcp takes a2-ultragpu-4g and a3-highgpu-2g, both with 4 Local SSDs, so the
    tier does not split its MIG: instance flexibility keeps taking every spot type in one group."""
    plan = CLOUDS["gcp"].plan(tiered_args("gcp", tiers=stack_raw("prod")["workloads"]["llm-finetune"]["checkpointTiers"]))
    assert [(g.key, g.machine_types, g.local_ssds) for g in plan.groups] == [
        ("aopt-lssd4", ("a2-ultragpu-4g", "a3-highgpu-2g"), 4)]


def test_gcp_template_carries_the_local_ssds() -> None:
    from spotgpu_pulumi.gcp.template import LOCAL_SSD_GB, local_ssd_disks

    disks = local_ssd_disks(8)
    assert len(disks) == 8 and {d["interface"] for d in disks} == {"NVME"}
    assert {(d["type"], d["disk_type"], d["disk_size_gb"]) for d in disks} == {("SCRATCH", "local-ssd", LOCAL_SSD_GB)}
    assert local_ssd_disks(0) == []


def test_the_preview_records_the_gcp_local_ssd_template() -> None:
    """The component builds the planned disks: the recorded A3 template lists 8 scratch NVMe disks."""
    import pulumi

    from spotgpu_pulumi.offline.mocks import RecordingMocks, RecordingMonitor

    args = tiered_args("gcp", machineTypes=MIXED_SSDS, optOut=KEEP_IDLE)
    mocks = RecordingMocks()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="spotgpu", stack="test", preview=False, monitor=monitor)
    plan = CLOUDS["gcp"].plan(args)
    pulumi.runtime.test(lambda: CLOUDS["gcp"].component("train-gcp", plan, None))()
    templates = {r.name: r.inputs for r in monitor.recorded if r.type == "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"}
    lssd = templates["train-gcp-spot-aopt-lssd8-template"]["disks"]
    assert sum(1 for d in lssd if d.get("type") == "SCRATCH" and d.get("interface") == "NVME") == 8
    assert all(d.get("type") != "SCRATCH" for d in templates["train-gcp-spot-aopt-template"]["disks"])


@pytest.mark.parametrize("cloud", SHIPPED)
def test_a_workloads_memory_budget_reaches_the_checkpoint_library_through_the_agent_config(
    cloud: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """checkpointTiers.local.memoryBudgetGiB -> the agent config's localTier.memoryBudgetBytes -> LocalTier ->
    TieredCheckpointManager.memory_budget_bytes: the gang job (spotgpu/drills/gang_job.py) builds its manager
    from LocalTier.from_environment(), so a platform team bounds every rank's background save without a code
    change. Without the key the agent config says nothing (no bound), as before."""
    from spotgpu.checkpoint.tiered import LocalTier

    args = tiered_args(cloud, {"local": {"keep": 2, "memoryBudgetGiB": 8}, "peerCopies": 1})
    script = scripts(cloud, args)[0]
    tier = agent_config(script).local_tier
    assert tier is not None and tier.memory_budget_bytes == 8 << 30
    body = script.split("<<'SPOTGPU_CONFIG'\n", 1)[1].split("\nSPOTGPU_CONFIG\n", 1)[0]
    (tmp_path / "agent.json").write_text(body)
    monkeypatch.setenv("SPOTGPU_LOCAL_DIR", str(tmp_path / "local"))
    found = LocalTier.from_environment(str(tmp_path / "agent.json"))
    assert found is not None and found.memory_budget_bytes == 8 << 30
    plain = agent_config(scripts(cloud, tiered_args(cloud))[0]).local_tier
    assert plain is not None and plain.memory_budget_bytes is None and "memoryBudgetBytes" not in scripts(
        cloud, tiered_args(cloud))[0]  # fmt: skip


@pytest.mark.parametrize("value", [0.01, 0, -1, "lots"])
def test_a_bad_memory_budget_is_one_line_naming_the_key_the_value_and_the_fix(value: Any) -> None:
    from spotgpu.config import ConfigError

    with pytest.raises(ConfigError) as err:
        tiered_args("aws", {"local": {"memoryBudgetGiB": value}, "peerCopies": 1})
    text = str(err.value)
    assert "\n" not in text
    assert "checkpointTiers.local.memoryBudgetGiB" in text and str(value) in text
    assert "fix: set GiB per rank, at least 0.0625 (64 MiB)" in text
