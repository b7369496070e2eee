"""Economics and the twin with checkpoint tiers (issue 33, item 5).

The joint-loss figure ``q`` from hand-made traces, the two intervals and their bounds, the
restore-source mix, the cost terms that change, the workload tag round trip, the config
checks, and the twin's tier mechanics on hand-timed traces.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from spotgpu.config import ConfigError, parse_stack_config
from spotgpu.contract.tags import encode_workload, workload_from_tag
from spotgpu.economics.cost import effective_cost
from spotgpu.economics.interval import choose_interval
from spotgpu.economics.tiers import JointLoss, default_joint_loss, joint_loss_from_traces, restore_mix
from spotgpu.models import WorkloadProfile, default_notice
from spotgpu.models.ladder import FallbackLadder, StepKind
from spotgpu.simulation.job import TwinJob, TwinTiers
from spotgpu.simulation.twin import TwinCloud, run_twin, twin_plan
from spotgpu.traces import Trace

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


def trace(zone: str, data: list[int]) -> Trace:
    return Trace(name=f"{zone}_x_1", zone=zone, group="test/hand", gap_seconds=300, data=np.asarray(data))


def test_joint_loss_in_one_zone_is_the_chance_a_copy_holder_went_in_the_same_tick() -> None:
    # 4 -> 2 (two lost: each one's single copy is on one of the 3 others, lost with it 1 time in 3),
    # back to 4, -> 3 (one lost: its copy survives): (2 x 1/3 + 1 x 0) / 3 lost nodes
    q = joint_loss_from_traces([trace("z1", [4, 2, 4, 3])], peer_copies=1, across_zones=False)
    assert q.probability == pytest.approx((2 / 3) / 3) and q.node_losses == 3
    # two copies: a lost pair never takes both
    assert joint_loss_from_traces([trace("z1", [4, 2, 4, 3])], 2, False).probability == 0.0


def test_joint_loss_across_zones_pairs_each_loss_with_the_other_zone_in_that_tick() -> None:
    a = trace("a", [2, 1, 2, 1])  # loses one of two at ticks 1 and 3
    b = trace("b", [2, 2, 2, 0])  # loses both at tick 3 only
    q = joint_loss_from_traces([a, b], peer_copies=1, across_zones=True)
    # a's loss at 1: b lost nothing (0); a's loss at 3: b lost all (1); b's two at 3: a lost half (0.5 each)
    assert q.probability == pytest.approx((0 + 1 + 2 * 0.5) / 4)


def test_a_tick_where_no_other_zone_holds_nodes_puts_the_partner_in_the_same_zone() -> None:
    """Defect: a partner "in another zone" was counted safe in a zone holding no nodes, so in the half of
    the shipped traces' ticks where only one zone had room, no peer was ever lost (q 4.1 %; the twin's
    spread gang fell back to the store after 60 % of its losses)."""
    a = trace("a", [4, 2, 4, 3])  # the only zone holding nodes: its losses are among zone-mates
    b = trace("b", [0, 0, 0, 0])
    q = joint_loss_from_traces([a, b], peer_copies=1, across_zones=True)
    assert q.probability == pytest.approx((2 / 3) / 3)  # the same-zone odds, not 0
    both = joint_loss_from_traces([a, trace("b", [2, 2, 2, 2])], peer_copies=1, across_zones=True)
    assert both.probability == 0.0  # with b holding nodes (none lost), every partner is there and survives


def test_no_peer_copy_means_every_lost_shard_comes_from_the_store() -> None:
    assert joint_loss_from_traces([], 0, True).probability == 1.0


def test_the_shipped_traces_say_peers_across_zones_go_together_less_often() -> None:
    """The 16-node traces: most losses in a zone take several nodes at once; partners across zones less
    often, but not rarely: in half the ticks only one zone holds nodes, and there they are zone-mates."""
    same, across = default_joint_loss(1, False), default_joint_loss(1, True)
    assert same.probability > 0.5 > across.probability > 0.2
    assert same.node_losses > 1000


def test_restore_mix_sums_to_one_and_a_single_node_restores_from_the_store() -> None:
    mix = restore_mix(4, 0.1)
    assert (mix.local, mix.peer) == pytest.approx((0.75, 0.225)) and mix.local + mix.peer + mix.store == pytest.approx(1)
    assert restore_mix(1, 1.0).store == 1.0


def test_the_local_interval_is_shorter_and_the_durable_one_a_whole_multiple() -> None:
    plain = choose_interval(profile(), AWS)
    tiered = choose_interval(profile(checkpointTiers=TIERS), AWS, joint_loss=default_joint_loss(1, True))
    t = tiered.tiers
    assert plain.tiers is None and t is not None
    assert tiered.seconds < plain.seconds  # the local write (15 s prior) is cheaper than the store's 75 s
    assert t.durable_seconds == t.durable_every * t.local_seconds and t.durable_every > 1
    assert t.durable_seconds >= 75  # never shorter than an upload
    assert t.lost_seconds() <= BASE["maxLostWorkSeconds"]
    assert t.lost_seconds() < plain.seconds / 2 + 75  # less work lost per interruption than store-only


def test_a_high_joint_loss_keeps_the_durable_interval_short_under_the_loss_bound() -> None:
    certain = JointLoss(1.0, 1, False, 0, "test")
    t = choose_interval(profile(checkpointTiers=TIERS, maxLostWorkSeconds=900), AWS, joint_loss=certain).tiers
    assert t is not None and t.lost_seconds() <= 900 and t.durable_every == 1


def test_a_configured_durable_interval_is_rounded_up_to_local_intervals() -> None:
    t = choose_interval(profile(checkpointIntervalSeconds=600, checkpointTiers={**TIERS, "durableIntervalSeconds": 1300}),
                        AWS).tiers  # fmt: skip
    assert t is not None and (t.local_seconds, t.durable_seconds, t.durable_every) == (600, 1800, 3)


def test_cost_pays_the_local_stall_and_the_store_writes_of_the_durable_interval() -> None:
    plain = effective_cost(profile(), AWS, ladder())
    decision = choose_interval(profile(checkpointTiers=TIERS), AWS, joint_loss=default_joint_loss(1, True))
    tiered = effective_cost(profile(checkpointTiers=TIERS), AWS, ladder(), interval=decision)
    assert decision.tiers is not None
    io = tiered.term("checkpoint_storage_io").inputs
    assert io["checkpoints"] == pytest.approx(36 * 3600 / decision.tiers.durable_seconds)
    assert io["checkpoint_write_seconds"] == pytest.approx(15.0)
    assert tiered.term("lost_compute").usd < plain.term("lost_compute").usd
    assert tiered.spot_total < plain.spot_total
    assert tiered.details["checkpointTiers"]["restoreMix"]["peer"] > 0.3


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
        # peers across the pool's zones: less often lost together than zone-mates (86.9 %)
        assert tiers["jointLossProbability"] == pytest.approx(default_joint_loss(1, True).probability, abs=1e-4)
        assert tiers["jointLossProbability"] < 0.5
    text = render_economics(report)
    assert text.count("tiers: local every ") == len(report["pools"])
    assert "restores expected from: local" in text
