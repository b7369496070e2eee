"""Economics and the twin with checkpoint tiers (issue 33, item 5).

The joint-loss figures on the shipped traces (on hand-made ones: test_gang_loss.py), the two
intervals and their bounds, the restore-source mix, the cost terms that change, the workload tag
round trip, the config checks, and the twin's tier mechanics on hand-timed traces.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from spotgpu.config import ConfigError, parse_stack_config
from spotgpu.contract.tags import encode_workload, workload_from_tag
from spotgpu.economics.cost import effective_cost
from spotgpu.economics.interval import choose_interval
from spotgpu.economics.tiers import JointLoss, default_joint_loss, restore_mix
from spotgpu.models import WorkloadProfile, default_notice
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.simulation.job import TwinJob, TwinTiers
from spotgpu.simulation.twin import TwinCloud, run_twin, twin_plan

BASE = {"checkpointBytes": 60_000_000_000, "checkpointWriteSeconds": 75, "checkpointLoadSeconds": 90,
        "restartSeconds": 300, "expectedReacquisitionSeconds": 900, "interruptionsPerHour": 0.08, "workHours": 36,
        "nodes": 2, "maxLostWorkSeconds": 1800, "prices": {"spotPerHour": 2.2, "onDemandPerHour": 5.67}}  # fmt: skip
TIERS = {"local": {"keep": 2}, "peerCopies": 1}
AWS = default_notice("aws")


def ladder() -> FallbackLadder:
    return FallbackLadder.model_validate({"steps": [
        {"kind": "same_pool", "maxWaitSeconds": 600, "costCeilingPerHour": 3.5},
        {"kind": "alternate_zone", "maxWaitSeconds": 600, "costCeilingPerHour": 3.5},
        {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 7.0},
    ]})  # fmt: skip


def profile(**changes: object) -> WorkloadProfile:
    return WorkloadProfile.model_validate({**BASE, **changes})


def test_the_shipped_traces_say_a_spread_gang_falls_back_less_often_than_one_in_a_zone() -> None:
    """The 16-node traces: a zone's capacity mostly goes at once, so a gang in one zone is nearly always lost
    whole; spread over three zones less often, but still mostly: in half the ticks only one zone has room,
    and the gang stays where its replacements landed."""
    same, across = default_joint_loss(2, 1, False), default_joint_loss(2, 1, True)
    assert same.probability > across.probability > 0.5
    assert same.node_losses > 200 and across.nodes == 2


def test_restore_mix_sums_to_one_survivors_local_replacements_peer_or_store() -> None:
    mix = restore_mix(JointLoss(0.2, 1, True, 10, "test", 4, 0.5, 0.15))
    assert (mix.local, mix.peer, mix.store) == pytest.approx((0.5, 0.35, 0.15))
    assert restore_mix(default_joint_loss(1, 0, True)).store == 1.0


def test_the_local_interval_is_shorter_and_the_durable_one_a_whole_multiple() -> None:
    plain = choose_interval(profile(), AWS)
    tiered = choose_interval(profile(checkpointTiers=TIERS), AWS, joint_loss=default_joint_loss(2, 1, True))
    t = tiered.tiers
    assert plain.tiers is None and t is not None
    assert tiered.seconds < plain.seconds  # the local write (15 s prior) is cheaper than the store's 75 s
    assert t.durable_seconds == t.durable_every * t.local_seconds and t.durable_every > 1
    assert t.durable_seconds >= 75  # never shorter than an upload
    assert t.lost_seconds() <= BASE["maxLostWorkSeconds"]
    # a gang whose interruptions rarely take a shard's every copy loses less work than store-only; on the
    # shipped traces three interruptions in four fall back to the durable step, which saves less often
    rare = JointLoss(0.1, 1, True, 0, "test: one node per interruption, copy lost 1 in 10", 2, 0.5, 0.05)
    seldom = choose_interval(profile(checkpointTiers=TIERS), AWS, joint_loss=rare).tiers
    assert seldom is not None and seldom.lost_seconds() < plain.seconds / 2 + 75 < t.lost_seconds()


def test_a_high_joint_loss_keeps_the_durable_interval_short_under_the_loss_bound() -> None:
    certain = JointLoss(1.0, 1, False, 0, "test: the whole gang every time", 2, 1.0, 1.0)
    t = choose_interval(profile(checkpointTiers=TIERS, maxLostWorkSeconds=900), AWS, joint_loss=certain).tiers
    assert t is not None and t.lost_seconds() <= 900 and t.durable_every == 1


def test_a_configured_durable_interval_is_rounded_up_to_local_intervals() -> None:
    t = choose_interval(profile(checkpointIntervalSeconds=600, checkpointTiers={**TIERS, "durableIntervalSeconds": 1300}),
                        AWS).tiers  # fmt: skip
    assert t is not None and (t.local_seconds, t.durable_seconds, t.durable_every) == (600, 1800, 3)


def test_cost_pays_the_local_stall_and_the_store_writes_of_the_durable_interval() -> None:
    plain = effective_cost(profile(), AWS, ladder())
    decision = choose_interval(profile(checkpointTiers=TIERS), AWS, joint_loss=default_joint_loss(2, 1, True))
    tiered = effective_cost(profile(checkpointTiers=TIERS), AWS, ladder(), interval=decision)
    assert decision.tiers is not None
    io = tiered.term("checkpoint_storage_io").inputs
    assert io["checkpoints"] == pytest.approx(36 * 3600 / decision.tiers.durable_seconds)
    assert io["checkpoint_write_seconds"] == pytest.approx(15.0)
    # most interruptions fall back to a durable step saved less often than store-only saves: more work lost,
    # but the stall and the store's writes fall by more
    assert tiered.term("checkpoint_storage_io").usd < plain.term("checkpoint_storage_io").usd / 1.5
    assert tiered.spot_total < plain.spot_total
    assert tiered.details["checkpointTiers"]["restoreMix"] == restore_mix(default_joint_loss(2, 1, True)).as_dict()


def test_the_workload_tag_carries_the_tiers_with_their_figures_resolved() -> None:
    tiered = profile(checkpointTiers=TIERS)
    text = encode_workload(tiered)
    assert ";L=2:1:15:63:48:a:224" in text and len(text) <= 256
    back = workload_from_tag(text)
    assert back.checkpoint_tiers is not None and back.checkpoint_tiers.local.write_seconds == 15
    again, first = choose_interval(back, AWS).tiers, choose_interval(tiered, AWS).tiers
    assert again is not None and first is not None
    assert (again.local_seconds, again.durable_seconds, again.q) == (first.local_seconds, first.durable_seconds, first.q)


@pytest.mark.parametrize(("tiers", "interval", "message"), [
    ({"durableIntervalSeconds": 60}, "auto", "checkpointTiers.durableIntervalSeconds: is not longer than "
                                             "checkpointWriteSeconds 75"),
    ({"durableIntervalSeconds": 500}, 900, "is shorter than the local interval checkpointIntervalSeconds 900"),
    ({"peerCopies": 4}, "auto", "checkpointTiers.peerCopies"),
    ({"local": {"path": "relative/dir"}}, "auto", "checkpointTiers.local.path"),
])  # fmt: skip
def test_bad_tier_config_is_one_line_naming_the_key(tiers: dict[str, object], interval: object, message: str) -> None:
    raw = {"environment": "dev", "owner": "me", "workloads": {"w": {**BASE, "checkpointIntervalSeconds": interval,
           "checkpointTiers": tiers}}, "ladders": {}, "pools": []}  # fmt: skip
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as err:
        parse_stack_config(raw)
    assert "\n" not in str(err.value)


# --- the twin -------------------------------------------------------------------------------------------
GROUPS = [("spot-a", StepKind.SAME_POOL), ("spot-b", StepKind.ALTERNATE_ZONE), ("od", StepKind.ON_DEMAND)]


def twin(spot_a: np.ndarray, tiers: TwinTiers | None) -> tuple[float, dict[str, int]]:
    """A 2-node gang at 60 s ticks: boot 240, load 60, local commits every 1200 s of work + 10 s write."""
    wl = profile(workHours=2.0, deadlineHours=20.0, checkpointIntervalSeconds=1200, checkpointWriteSeconds=10)
    plan = twin_plan(wl, ladder(), GROUPS, start=0.0, interval_seconds=1200)
    job = TwinJob(work_seconds=7200.0, deadline_seconds=72000.0, interval_seconds=1200.0, write_seconds=10.0,
                  boot_seconds=240.0, load_seconds=60.0, nodes=2, tiers=tiers)  # fmt: skip
    cloud = TwinCloud(plan, job, {"spot-a": spot_a, "spot-b": np.full(400, 2, dtype=np.int64)}, 60, 0.0)
    result = run_twin(plan, cloud, horizon_seconds=24000)
    return result.lost_work_hours * 3600, result.restores


TIER = TwinTiers(durable_every=2, upload_seconds=30.0, tier_load_seconds=5.0, peer_copies=1)


def zone(up: int, then: int, until: int) -> np.ndarray:
    a = np.full(400, up, dtype=np.int64)
    a[until:] = then
    return a


def test_twin_one_node_lost_its_copy_survives_the_gang_keeps_the_local_step() -> None:
    # first local commit at 300 + 1200 + 10 = 1510 s; one VM taken at 1800 s: 290 s lost, as without tiers
    lost, restores = twin(zone(2, 1, 30), TIER)
    assert lost == pytest.approx(290) and twin(zone(2, 1, 30), None)[0] == pytest.approx(290)
    assert restores["peer"] >= 1 and restores["local"] >= 1 and restores["store"] == 0


def test_twin_a_node_and_its_peer_lost_together_fall_back_to_the_durable_step() -> None:
    # both taken at 1800 s: the only local commit (1200 s of work) is gone with them, nothing durable yet
    lost, restores = twin(zone(2, 0, 30), TIER)
    assert lost == pytest.approx(1200 + 290)
    assert restores == {"local": 0, "peer": 0, "store": 0}  # nothing committed to restore: a fresh start
    # taken at 3000 s: the second local commit (2720 s) is durable at 2750 s: 280 s lost
    lost, restores = twin(zone(2, 0, 50), TIER)
    assert lost == pytest.approx(280) and restores["store"] == 2 and restores["peer"] == 0
    assert math.isclose(twin(zone(2, 0, 50), None)[0], 280)


def test_the_preview_prints_both_intervals_and_the_restore_mix() -> None:
    """The prod stack with tiers on its workload: every pool (3 zones, so peers across them) shows the local
    and the store interval and the expected restore sources, in the text and in --json."""
    from pathlib import Path

    from spotgpu.config import read_stack_file
    from spotgpu.economics.report import render_economics, stack_economics

    repo = Path(__file__).resolve().parents[2]
    raw, _ = read_stack_file(str(repo / "stacks" / "Pulumi.prod.yaml"))
    for workload in raw["workloads"].values():
        workload["checkpointTiers"] = TIERS
    report = stack_economics(parse_stack_config(raw, project_dir=str(repo)))
    for name, pool in report["pools"].items():
        tiers = pool["checkpointTiers"]
        assert tiers["durableIntervalSeconds"] == tiers["durableEvery"] * tiers["localIntervalSeconds"], name
        assert set(tiers["restoreMix"]) == {"local", "peer", "store"}
        # the gang spread over the pool's zones: falls back less often than a gang in one zone
        assert tiers["jointLossProbability"] == pytest.approx(default_joint_loss(2, 1, True).probability, abs=1e-4)
        assert tiers["jointLossProbability"] < default_joint_loss(2, 1, False).probability
    text = render_economics(report)
    assert text.count("tiers: local every ") == len(report["pools"])
    assert "restores expected from: local" in text
