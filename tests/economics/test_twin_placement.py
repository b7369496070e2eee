"""Issue 33 leftover: the twin places a gang across the pool's zones as the pool does, with peers across zones.

A pool's spot group spans its zones (a GCP regional MIG, an AWS Auto Scaling group over several zones'
subnets, an Azure zonal scale set), so a zone reclaim takes that zone's nodes only; a node whose peer copy
sat in the reclaimed zone too restores from the store. Defect: the twin's primary group was one zone, so
the gang, and its peer copies, sat in one zone and every zone reclaim took all of them.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from spotgpu.economics.placement import holders, next_zone, spread
from spotgpu.models.ladder import FallbackLadder
from spotgpu.models.workload import Prices, WorkloadProfile
from spotgpu.simulation.job import TwinJob, TwinTiers
from spotgpu.simulation.twin import TwinCloud, TwinResult, regional_groups, run_twin, twin_plan, zone_groups

ZONES = ["a", "b", "c"]


def test_a_gang_spreads_evenly_over_the_zones_first_zone_first() -> None:
    assert spread(5, ZONES) == ("a", "b", "c", "a", "b")
    for nodes in range(1, 10):
        counts = Counter(spread(nodes, ZONES))
        assert sum(counts.values()) == nodes and max(counts.values()) - min(counts.get(z, 0) for z in ZONES) <= 1


def test_a_zone_without_room_is_skipped_and_no_room_anywhere_launches_nothing() -> None:
    assert spread(3, ZONES, room={"a": 0, "b": 5, "c": 1}) == ("b", "c", "b")
    assert spread(4, ZONES, room={"a": 1, "b": 0, "c": 1}) == ("a", "c")
    assert next_zone(ZONES, {"a": 2, "b": 1, "c": 1}, {"a": 1, "b": 1, "c": 1}) == "b"  # fewest, then the order
    assert next_zone(ZONES, {}, {"a": 0, "b": 0, "c": 0}) is None


def test_peer_partners_sit_in_another_zone_whenever_the_gang_spans_zones() -> None:
    members = [("v1", "a"), ("v2", "b"), ("v3", "a"), ("v4", "b")]
    zone = dict(members)
    held = holders(members, 1)
    assert all(len(h) == 2 and vm in h for vm, h in held.items())
    assert all(zone[p] != zone[vm] for vm, h in held.items() for p in h - {vm})
    # 4 nodes over 3 zones: the zone holding two has one pair whose copy stays in it (the ring's wrap)
    four = [(f"v{i}", z) for i, z in enumerate(spread(4, ZONES))]
    same = [vm for vm, h in holders(four, 1).items() if any(dict(four)[p] == dict(four)[vm] for p in h - {vm})]
    assert len(same) == 1 and dict(four)[same[0]] == "a"
    assert holders([("v1", "a"), ("v2", "a")], 0) == {"v1": {"v1"}, "v2": {"v2"}}


TIER = TwinTiers(durable_every=4, upload_seconds=30.0, tier_load_seconds=5.0, peer_copies=1)
LADDER = FallbackLadder.model_validate({"steps": [
    {"kind": "same_pool", "maxWaitSeconds": 3600, "costCeilingPerHour": 3},
    {"kind": "on_demand", "maxWaitSeconds": 3600, "costCeilingPerHour": 10}]})  # fmt: skip


def _twin(nodes: int, traces: dict[str, np.ndarray], regional: bool) -> tuple[TwinResult, TwinCloud]:
    job = TwinJob(work_seconds=4 * 3600.0, deadline_seconds=40 * 3600.0, interval_seconds=600.0, write_seconds=10.0,
                  boot_seconds=120.0, load_seconds=300.0, nodes=nodes, tiers=TIER)  # fmt: skip
    wl = WorkloadProfile(checkpoint_bytes=10**9, checkpoint_write_seconds=10, checkpoint_load_seconds=300,
                         restart_seconds=120, expected_reacquisition_seconds=600, interruptions_per_hour=0.1,
                         work_hours=4.0, deadline_hours=40.0, nodes=nodes,
                         prices=Prices(spot_per_hour=2.0, on_demand_per_hour=6.0))  # fmt: skip
    zones = list(traces)
    if regional:
        groups, index = regional_groups(zones, 0)
        given = {"spot": {z: traces[z] for z in index["spot"]}}
    else:
        groups, zindex = zone_groups(zones, 0, nodes)
        given = {name: traces[zones[i]] for name, i in zindex.items()}
    plan = twin_plan(wl, LADDER, groups, start=0.0, interval_seconds=600)
    cloud = TwinCloud(plan, job, given, 60.0, 0.0)
    return run_twin(plan, cloud, horizon_seconds=20 * 3600.0), cloud


def _reclaim_a(nodes_per_zone: int, ticks: int = 1200) -> dict[str, np.ndarray]:
    out = {z: np.full(ticks, nodes_per_zone, dtype=np.int64) for z in ZONES}
    out["a"][90:150] = 0  # zone a reclaimed for an hour, 1.5 h into the job
    return out


def test_the_regional_group_places_the_gang_over_its_zones_and_a_zone_reclaim_takes_only_its_nodes() -> None:
    result, cloud = _twin(3, _reclaim_a(3), regional=True)
    assert result.interruptions == 1 and result.gang_losses == 1  # zone a's one node, not the gang
    assert Counter(r.group for r in cloud.removals) <= Counter({"spot": 3})
    # the replacement took zone b or c (a had no room) and pulled its shard from its partner there
    assert result.restores == {"local": 2, "peer": 1, "store": 0}
    assert np.isfinite(result.finish_seconds)


def test_a_node_whose_partner_was_in_the_reclaimed_zone_too_restores_from_the_store() -> None:
    """4 nodes over 3 zones: zone a holds two, one of whose copies is on the other; both go with the zone."""
    result, _ = _twin(4, _reclaim_a(4), regional=True)
    assert result.interruptions == 2 and result.gang_losses == 1
    # the newest local step lost a shard with its copy: back to the durable one; survivors read theirs locally,
    # the two replacements the store
    assert result.restores == {"local": 2, "peer": 0, "store": 2}


def test_the_old_one_zone_primary_lost_the_whole_gang_to_the_same_reclaim() -> None:
    """The baseline the fix is judged against: the gang in its home zone, its copies with it."""
    result, _ = _twin(3, _reclaim_a(3), regional=False)
    assert result.interruptions == 3 and result.restores["peer"] == 0 and result.restores["store"] == 3


def test_the_ladder_replay_can_run_the_pool_as_deployed() -> None:
    from spotgpu.simulation.ladder import ControllerLadder
    from spotgpu.simulation.replay import Job

    job = Job(work_hours=2.0, deadline_hours=20.0, interval_seconds=600.0, checkpoint_write_seconds=10.0,
              restart_seconds=300.0, load_seconds=60.0, spot_per_hour=2.0, on_demand_per_hour=6.0, nodes=3)  # fmt: skip
    counts = np.stack([_reclaim_a(3)[z] for z in ZONES])
    spread_runs = ControllerLadder(LADDER, regional=True).run(job, counts, 60.0, [0], [0], ZONES)
    one_zone = ControllerLadder(LADDER).run(job, counts, 60.0, [0], [0], ZONES)
    assert spread_runs[0].interruptions == 1 and one_zone[0].interruptions == 3  # zone a's share only
    assert spread_runs[0].gangs[0] == ("spot", "spot", "spot")
