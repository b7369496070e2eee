"""The restore mix and the fall-back chance count every node an interruption takes from the gang.

Defect: ``restore_mix`` assumed one node lost per interruption (local ``(N-1)/N``) and ``q`` was the
chance a lost node's peer went in the same tick among the traces' 16 nodes. On the shipped traces a
zone's capacity mostly goes all at once, and a 2-node gang sits in one zone most of the time (after a
loss its replacement lands where there is room), so a reclaim usually takes the whole gang: the twin
restored ~80 % of its ranks from the store where the model printed 16 %.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from spotgpu.economics.interval import choose_interval
from spotgpu.economics.tiers import (
    JOINT_LOSS_TRACES,
    JointLoss,
    default_joint_loss,
    gang_loss_from_traces,
    pool_joint_loss,
    restore_mix,
)
from spotgpu.models import WorkloadProfile, default_notice
from spotgpu.project import load_stack
from spotgpu.simulation.ladder import ControllerLadder
from spotgpu.simulation.twin import TwinCloud, run_twin, twin_job_for, twin_plan
from spotgpu.traces import Trace, load_group

REPO = Path(__file__).resolve().parents[2]
TIERS = {"local": {"keep": 2}, "peerCopies": 1}
BASE = {"checkpointBytes": 60_000_000_000, "checkpointWriteSeconds": 75, "checkpointLoadSeconds": 90,
        "restartSeconds": 300, "expectedReacquisitionSeconds": 900, "interruptionsPerHour": 0.08, "workHours": 36,
        "nodes": 2, "maxLostWorkSeconds": 1800, "prices": {"spotPerHour": 2.2, "onDemandPerHour": 5.67},
        "checkpointTiers": TIERS}  # fmt: skip
#: How far the model's shares may sit from the twin's on the shipped traces (absolute, each source).
TOLERANCE = 0.08


@pytest.fixture
def hand_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$SPOTGPU_TRACES`` holding hand-made traces where the shipped multi-node group sits."""
    folder = tmp_path / JOINT_LOSS_TRACES
    folder.mkdir(parents=True)
    monkeypatch.setenv("SPOTGPU_TRACES", str(tmp_path))
    default_joint_loss.cache_clear()
    yield folder
    default_joint_loss.cache_clear()


def test_a_spread_two_node_gang_counts_both_nodes_when_a_reclaim_takes_both(hand_traces: Path) -> None:
    """Zone a holds 2, then 1, 1, 0, 2; zone b 0, 1, 1, 1, 0 (capacity per 300 s tick). The pool puts both
    nodes in a (b has no room); a's drop to 1 takes one node, its copy survives on the other and the
    replacement lands in b (local + peer); a's drop to 0 takes the node there, and b's the other before
    the gang is whole again: both shards with every copy gone (store, store). Per interruption: local
    (1/2 + 0)/2, peer (1/2 + 0)/2, store (0 + 1)/2, and one of the two falls back to the durable step.
    The old mix said local 1/2 whatever the traces (one node lost per interruption)."""
    for zone, data in (("a", [2, 1, 1, 0, 2]), ("b", [0, 1, 1, 1, 0])):
        (hand_traces / f"{zone}_x_1.json").write_text(json.dumps({"metadata": {"gap_seconds": 300}, "data": data}))
    workload = WorkloadProfile.model_validate(BASE)
    t = choose_interval(workload, default_notice("aws"), joint_loss=pool_joint_loss(workload, 2)).tiers
    assert t is not None
    assert (t.mix.local, t.mix.peer, t.mix.store) == pytest.approx((0.25, 0.25, 0.5))
    assert t.q == pytest.approx(0.5)  # the gang falls back to the durable step after one loss in two


def _twin_mix(placement: str) -> tuple[dict[str, float], dict[str, float], int]:
    """(the model's mix, the twin's restores after interruptions as shares, moved restores) for the prod
    AWS pool's 2-node gang on the shipped 16-node traces, placed as ``bench/recovery.py`` places it."""
    config = load_stack("prod", REPO)
    pool = next(p for p in config.pools if p.cloud == "aws")
    workload = config.workload_for(pool).model_copy(update={"checkpoint_tiers": BASE_TIERS})
    regional = placement == "regional"
    decision = choose_interval(workload, pool.notice, joint_loss=pool_joint_loss(workload, 3 if regional else 1))
    assert decision.tiers is not None
    traces = load_group(JOINT_LOSS_TRACES)
    zones, gap = [t.zone for t in traces], traces[0].gap_seconds
    rows = [np.ascontiguousarray(t.data) for t in traces]
    ladder = ControllerLadder(config.ladder_for(pool), regional=regional)
    restores = {"local": 0, "peer": 0, "store": 0}
    moved = 0
    for start in range(0, min(len(t.data) for t in traces) - 200, 200):
        for home in range(len(zones)):
            groups, given = ladder.groups(zones, home, workload.nodes, rows)
            plan = twin_plan(workload, ladder.ladder, groups, start=start * gap, interval_seconds=decision.seconds)
            cloud = TwinCloud(plan, twin_job_for(workload, decision.seconds, decision.tiers), given, gap, start * gap)
            result = run_twin(plan, cloud, horizon_seconds=3 * workload.work_hours * 3600)
            for source in restores:
                restores[source] += result.restores[source] - result.moved_restores[source]
            moved += sum(result.moved_restores.values())
    total = sum(restores.values())
    assert total > 300, restores  # enough interruptions to compare shares
    return decision.tiers.mix.as_dict(), {k: v / total for k, v in restores.items()}, moved


BASE_TIERS = WorkloadProfile.model_validate(BASE).checkpoint_tiers


@pytest.mark.parametrize("placement", ["regional", "one zone"])
def test_the_model_mix_agrees_with_the_twin_on_the_shipped_traces(placement: str) -> None:
    """The twin replays the prod AWS pool's ladder (as bench/recovery.py does): its restores after
    interruptions (not after the controller moved the job) are within TOLERANCE of the model's mix."""
    model, twin, moved = _twin_mix(placement)
    for source in ("local", "peer", "store"):
        assert model[source] == pytest.approx(twin[source], abs=TOLERANCE), (placement, model, twin)
    assert twin["store"] > 0.5 and moved > 0  # most interruptions take the whole gang; moves are counted apart


# --- gang_loss_from_traces on hand-made traces: the edge cases -------------------------------------------
def trace(zone: str, data: list[int]) -> Trace:
    return Trace(name=f"{zone}_x_1", zone=zone, group="test/hand", gap_seconds=300, data=np.asarray(data))


def shares(loss: JointLoss) -> tuple[float, float, float, float]:
    mix = restore_mix(loss)
    return loss.probability, mix.local, mix.peer, mix.store


def test_one_node_has_no_peer_and_restores_from_the_store_without_traces() -> None:
    loss = gang_loss_from_traces([], nodes=1, peer_copies=1, across_zones=True)
    assert shares(loss) == (1.0, 0.0, 0.0, 1.0) and loss.peer_copies == 0


def test_no_peer_copies_make_every_interruption_fall_back_but_survivors_still_read_their_tier() -> None:
    # 2 -> 1 takes one node of two (survivor local, replacement store), 2 -> 0 both (store, store)
    loss = gang_loss_from_traces([trace("a", [2, 1, 2, 0, 2])], nodes=2, peer_copies=0, across_zones=False)
    assert shares(loss) == pytest.approx((1.0, 0.25, 0.0, 0.75))


def test_a_gang_lost_whole_every_time_restores_every_rank_from_the_store() -> None:
    loss = gang_loss_from_traces([trace("a", [2, 0, 2, 0, 2, 0])], nodes=2, peer_copies=1, across_zones=False)
    assert shares(loss) == (1.0, 0.0, 0.0, 1.0) and loss.node_losses == 6


def test_traces_that_never_lose_the_gang_never_fall_back() -> None:
    loss = gang_loss_from_traces([trace("a", [4, 3, 2, 4])], nodes=2, peer_copies=1, across_zones=False)
    assert shares(loss) == pytest.approx((0.0, 0.5, 0.5, 0.0)) and "no loss" in loss.source


def test_traces_that_never_hold_the_gang_take_every_restore_from_the_store() -> None:
    loss = gang_loss_from_traces([trace("a", [1, 1, 0, 1])], nodes=2, peer_copies=1, across_zones=False)
    assert shares(loss) == (1.0, 0.0, 0.0, 1.0) and "never hold" in loss.source


def test_a_spread_gang_keeps_a_lost_nodes_copy_in_the_other_zone() -> None:
    # one node in each zone; a's goes (its partner in b keeps its copy); its replacement waits for room
    loss = gang_loss_from_traces([trace("a", [1, 1, 0, 1]), trace("b", [1, 1, 1, 1])], 2, 1, True)
    assert shares(loss) == pytest.approx((0.0, 0.5, 0.5, 0.0))
    # the same traces with the gang in one zone: it is never whole in a alone, nor in b alone
    assert gang_loss_from_traces([trace("a", [1, 1, 0, 1]), trace("b", [1, 1, 1, 1])], 2, 1, False).probability == 1.0


def test_a_survivor_lost_before_the_gang_is_whole_again_counts_in_the_same_interruption() -> None:
    # a 2 -> 1: one node goes; no room for its replacement until tick 3, and a -> 0 at tick 2 takes the
    # survivor too: one interruption that lost both (with its copy)
    loss = gang_loss_from_traces([trace("a", [2, 1, 0, 2])], nodes=2, peer_copies=1, across_zones=False)
    assert shares(loss) == (1.0, 0.0, 0.0, 1.0) and loss.node_losses == 2


def test_a_second_copy_survives_a_loss_of_two_of_three() -> None:
    # three in one zone, 3 -> 1: the two newest go. One copy each (ring n1 -> n2 -> n3 -> n1): n2's copy was
    # on n3, lost too; two copies each: the survivor holds both lost shards
    one = gang_loss_from_traces([trace("a", [3, 1, 3])], nodes=3, peer_copies=1, across_zones=False)
    two = gang_loss_from_traces([trace("a", [3, 1, 3])], nodes=3, peer_copies=2, across_zones=False)
    assert shares(one) == pytest.approx((1.0, 1 / 3, 0.0, 2 / 3))
    assert shares(two) == pytest.approx((0.0, 1 / 3, 2 / 3, 0.0))


def test_figures_for_another_gang_size_are_refused() -> None:
    workload = WorkloadProfile.model_validate({**BASE, "nodes": 4})
    with pytest.raises(ValueError, match="for a gang of 2, the workload has 4 nodes"):
        choose_interval(workload, default_notice("aws"), joint_loss=default_joint_loss(2, 1, True))
    with pytest.raises(ValueError, match="store share"):
        JointLoss(0.1, 1, True, 0, "test", 2, 0.5, 0.3)  # more ranks from the store than fall-backs can make
