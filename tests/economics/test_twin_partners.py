"""The twin's peer partners follow the checkpoint library's: chosen when a gang forms, from its VMs' current zones.

The library (``TieredCheckpointManager.__init__``) gathers every rank's zone (``$SPOTGPU_ZONE``, which
``spotgpu gang run`` exports from the VM's agent before each torchrun incarnation) and computes
``plan.partners`` once per incarnation; a replacement's gang is a new incarnation, so partners are chosen
again from where the nodes are now. Copies follow the new partners from that incarnation's first commit
on; the step it restored stays where it was, plus on each rank that read its shard from a peer.

Defect: the twin gave the restored step the new gang's partners at once, so a zone reclaim between a
restore and the next commit looked survivable when the library's copies were all in the reclaimed zone.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu.economics.placement import holders
from spotgpu.simulation.job import AgentChannel, JobRun, TwinJob, TwinTiers

INTERVAL, WRITE, LOAD, TIER_LOAD = 600.0, 10.0, 300.0, 5.0
TIERS = TwinTiers(durable_every=100, upload_seconds=30.0, tier_load_seconds=TIER_LOAD, peer_copies=1)


@dataclass(frozen=True)
class Node:
    id: str
    zone: str
    group: str = "spot"
    price: float = 1.0
    units: float = 1.0
    speed: float = 1.0
    ready_at: float = 0.0


def _run(nodes: int, tiers: TwinTiers = TIERS) -> JobRun:
    job = TwinJob(work_seconds=100 * 3600.0, deadline_seconds=200 * 3600.0, interval_seconds=INTERVAL,
                  write_seconds=WRITE, boot_seconds=120.0, load_seconds=LOAD, nodes=nodes, tiers=tiers)  # fmt: skip
    return JobRun(job, AgentChannel("twin"))


def _start(run: JobRun, gang: list[Node], t: float) -> float:
    """Form the gang at t and let it load: the time it starts running."""
    run.form_gang(gang, t)
    assert run.phase == "loading"
    run.step(run.phase_until)
    assert run.phase == "running"
    return run.run_start


def _lose(run: JobRun, gone: list[Node], t: float) -> None:
    run.lost(t)
    for v in gone:
        run.vm_gone(v.id)


def _zones(gang: list[Node]) -> dict[str, str]:
    return {v.id: v.zone for v in gang}


# v1..v4 over zones a, b, c: the ring (by zone) is v1 -> v2 -> v3 -> v4 -> v1; v2's copy is on v3, in zone c
V1, V2, V3, V4 = Node("v1", "a"), Node("v2", "b"), Node("v3", "c"), Node("v4", "a")
V5 = Node("v5", "c")  # v2's replacement, in its old partner's zone (zone b had no room)
FIRST = [V1, V2, V3, V4]
SECOND = [V1, V3, V4, V5]


def _second_gang(run: JobRun) -> float:
    """The first gang commits twice, loses v2, and the second gang (v5 for v2) forms: when it runs."""
    started = _start(run, FIRST, 0.0)
    lost_at = started + 2 * (INTERVAL + WRITE) + 100.0
    _lose(run, [V2], lost_at)
    assert run.committed == 2 * INTERVAL
    return _start(run, SECOND, lost_at + 200.0)


def test_the_first_gangs_ring_holds_v2s_copy_in_zone_c() -> None:
    assert holders([(v.id, v.zone) for v in FIRST], 1)["v2"] == {"v2", "v3"}


def test_a_replacement_in_its_old_partners_zone_gets_a_partner_in_another_zone_at_the_next_incarnation() -> None:
    run = _run(4)
    started = _second_gang(run)
    assert run.restores == {"local": 3, "peer": 1, "store": 0}  # v5 read v2's shard from v3
    zone = _zones(SECOND)
    assert all(zone[p] != zone[vm] for vm, hs in run.ring.items() for p in hs - {vm})
    assert run.ring["v5"] == {"v5", "v1"}
    # the second gang commits; then zone c is reclaimed (v3 and v5): every shard still has a copy in zone a
    lost_at = started + (INTERVAL + WRITE) + 100.0
    _lose(run, [V3, V5], lost_at)
    committed = run.committed
    assert committed == 3 * INTERVAL
    _start(run, [V1, V4, Node("v6", "b"), Node("v7", "b")], lost_at + 200.0)
    assert run.committed == committed and run.lost_work == 2 * 100.0
    assert run.restores == {"local": 5, "peer": 3, "store": 0}


def test_a_zone_reclaim_before_the_new_gangs_first_commit_finds_the_restored_step_where_the_library_left_it() -> None:
    """Defect: the twin gave the restored step the new ring at once (v5's copy on v1, in zone a). In the library
    v2's shard of that step is on v3 (the old partner) and v5 (which received it), both in zone c."""
    run = _run(4)
    started = _second_gang(run)
    lost_at = started + 100.0  # before the second gang's first commit
    _lose(run, [V3, V5], lost_at)
    assert run.committed == 2 * INTERVAL
    _start(run, [V1, V4, Node("v6", "b"), Node("v7", "b")], lost_at + 200.0)
    assert run.committed == 0.0  # no durable step yet (every 100th commit): back to the start
    assert run.lost_work == 100.0 + 100.0 + 2 * INTERVAL


def test_a_gang_in_one_zone_has_partners_in_that_zone_and_a_reclaim_of_two_sends_them_to_the_store() -> None:
    gang = [Node("v1", "a"), Node("v2", "a"), Node("v3", "a")]
    assert holders([(v.id, v.zone) for v in gang], 1) == {"v1": {"v1", "v2"}, "v2": {"v2", "v3"}, "v3": {"v3", "v1"}}
    run = _run(3, TwinTiers(durable_every=2, upload_seconds=30.0, tier_load_seconds=TIER_LOAD, peer_copies=1))
    started = _start(run, gang, 0.0)
    lost_at = started + 3 * (INTERVAL + WRITE) + 100.0  # commits 1-3 local, commit 2 durable
    _lose(run, gang[:2], lost_at)
    assert run.committed == 3 * INTERVAL and run.durable == 2 * INTERVAL
    _start(run, [gang[2], Node("v4", "a"), Node("v5", "a")], lost_at + 200.0)
    assert run.committed == 2 * INTERVAL  # v1's shard went with v2, its only copy: the durable step
    assert run.restores == {"local": 1, "peer": 0, "store": 2}
