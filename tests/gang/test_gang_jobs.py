"""Real gangs on one machine: gloo ranks (gang_job.py, a DDP MLP with dropout, Adam and a
ResumableSampler, periodic saves), one real agent and one loopback fake metadata server per
node. After every interruption the gang resumes in the same test, and the resumed per-step
losses and final parameters must be bitwise equal to an uninterrupted run."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from gang_testkit import Cluster, Node, alive, wait_until

from spotgpu.checkpoint import CheckpointManager
from spotgpu.contract.drain import DrainChannel
from spotgpu.contract.state_store import ObjectJsonStore
from spotgpu.gang import EXIT_GANG_STOP, EXIT_PEER_LOST

STEPS = 80  # gang_job.py's default
PACED = {"GANG_STEP_SLEEP": 0.03}  # interrupted runs are paced so the notice lands mid-run
AWS_VM = "i-0123456789abcdef0"  # the instance id FakeAwsImds serves

Reference = Callable[[int], tuple[dict[int, dict[int, str]], bytes]]


def resume_and_compare(cluster: Cluster, world: int, reference: Reference, expect_step: int | None) -> None:
    """A replacement gang (fresh nodes) resumes at ``expect_step`` and finishes like the reference."""
    nodes = cluster.add_nodes(["aws"] * world)
    job = cluster.launch("resume", world, [n.address for n in nodes])
    assert cluster.finish(job, timeout=90) == [0] * world, cluster.stderr("resume")
    ref_losses, ref_params = reference(world)
    first = 0 if expect_step is None else expect_step + 1
    for rank in range(world):
        assert cluster.result("resume", rank)["restored"] == expect_step
        assert cluster.losses("resume", rank) == {s: ref_losses[rank][s] for s in range(first, STEPS)}
        interrupted = cluster.losses("run", rank)
        assert interrupted == {s: ref_losses[rank][s] for s in interrupted}
    assert cluster.params("resume") == ref_params
    for node in nodes:
        restored = wait_until(lambda n=node: n.agent.state.restored)  # type: ignore[misc]
        assert restored.step == expect_step


def stopped_together(cluster: Cluster, world: int, noticed: list[int]) -> int:
    results = [cluster.result("run", r) for r in range(world)]
    steps = {r["stop_step"] for r in results}
    assert len(steps) == 1, results
    assert all(r["noticed"] == noticed for r in results), results
    return steps.pop()


def check_agents(nodes: list[Node], noticed: list[int], outcome: str) -> None:
    """Noticed nodes drain after their "final" report; the others record a peer stop and keep running."""
    committed = outcome == "committed"
    for rank, node in enumerate(nodes):
        state = node.agent.state
        if rank in noticed:
            wait_until(lambda s=state: s.phase == "drained")  # type: ignore[misc]
            assert state.final_report is not None and state.final_report.committed is committed
            assert state.gang is not None and state.gang.role == "noticed"
            assert node.metric("spotgpu_agent_gang_stops_total", role="noticed", outcome=outcome) == 1
        else:
            wait_until(lambda s=state: s.gang)  # type: ignore[misc]
            assert state.phase == "running" and state.final_report is None
            assert state.gang is not None and (state.gang.role, state.gang.committed) == ("peer", committed)
            assert state.gang.noticed_ranks == noticed and state.gang.reason
            assert node.metric("spotgpu_agent_gang_stops_total", role="peer", outcome=outcome) == 1
            assert node.agent.status()["gang"]["role"] == "peer"  # type: ignore[index]


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("providers", "noticed"),
    [(["aws", "gcp"], 0), (["aws", "gcp"], 1), (["azure", "aws", "gcp", "aws"], 2)],
    ids=["2-ranks-node0-aws", "2-ranks-node1-gcp", "4-ranks-node2-gcp"],
)
def test_a_notice_on_one_node_stops_every_rank_at_one_step(
    cluster: Cluster, reference: Reference, providers: list[str], noticed: int
) -> None:
    world = len(providers)
    nodes = cluster.add_nodes(providers)
    job = cluster.launch("run", world, [n.address for n in nodes], **PACED)
    cluster.wait_steps("run", 15)
    nodes[noticed].notice(lead=30)
    assert cluster.finish(job) == [EXIT_GANG_STOP] * world, cluster.stderr("run")
    step = stopped_together(cluster, world, [noticed])
    assert all(cluster.result("run", r)["committed"] for r in range(world))
    check_agents(nodes, [noticed], "committed")
    assert nodes[noticed].agent.state.final_report.step == step  # type: ignore[union-attr]
    resume_and_compare(cluster, world, reference, step)


@pytest.mark.timeout(150)
def test_a_notice_during_a_periodic_save_stops_at_that_step(cluster: Cluster, reference: Reference) -> None:
    nodes = cluster.add_nodes(["aws", "aws"])
    job = cluster.launch("run", 2, [n.address for n in nodes], GANG_SAVE_PAUSE=1.0, GANG_PAUSE_AT_STEP=20, **PACED)
    wait_until(lambda: (cluster.out / "run-r1.saving").exists(), timeout=60)
    nodes[1].notice(lead=30)
    assert cluster.finish(job) == [EXIT_GANG_STOP] * 2, cluster.stderr("run")
    assert stopped_together(cluster, 2, [1]) == 20  # the check right after the save
    check_agents(nodes, [1], "committed")
    resume_and_compare(cluster, 2, reference, 20)


@pytest.mark.timeout(150)
def test_notices_on_two_nodes_share_the_smaller_budget(cluster: Cluster, reference: Reference) -> None:
    nodes = cluster.add_nodes(["aws"] * 4)
    job = cluster.launch("run", 4, [n.address for n in nodes], GANG_SAVE_PAUSE=1.5, GANG_PAUSE_AT_STEP=20, **PACED)
    wait_until(lambda: (cluster.out / "run-r0.saving").exists(), timeout=60)
    nodes[1].notice(lead=60)
    nodes[3].notice(lead=25)
    assert cluster.finish(job) == [EXIT_GANG_STOP] * 4, cluster.stderr("run")
    assert stopped_together(cluster, 4, [1, 3]) == 20
    smaller = nodes[3].agent.state.notice.budget_deadline  # type: ignore[union-attr]
    assert smaller < nodes[1].agent.state.notice.budget_deadline  # type: ignore[union-attr,operator]
    assert all(cluster.result("run", r)["budget_deadline"] == smaller for r in range(4))
    assert "smallest budget wins" in cluster.result("run", 0)["reason"]
    check_agents(nodes, [1, 3], "committed")
    resume_and_compare(cluster, 4, reference, 20)


@pytest.mark.timeout(150)
def test_a_controller_drain_of_one_vm_stops_the_gang(cluster: Cluster, reference: Reference, tmp_path: Path) -> None:
    store = f"file://{tmp_path}/_controller"
    plain = cluster.add_nodes(["gcp"])
    drained = cluster.add_nodes(
        ["aws"], control_store=store, runtime={"control_poll_seconds": 0.1, "drain_budget_seconds": 20.0}
    )
    nodes = plain + drained
    assert drained[0].agent.link is not None
    wait_until(lambda: drained[0].agent.link.vm_id())  # type: ignore[union-attr]
    job = cluster.launch("run", 2, [n.address for n in nodes], GANG_EVERY="auto", **PACED)  # agreed k, same steps
    cluster.wait_steps("run", 15)
    channel = DrainChannel(ObjectJsonStore(store))
    channel.request("aws-pool", AWS_VM, time.time())
    assert cluster.finish(job) == [EXIT_GANG_STOP] * 2, cluster.stderr("run")
    step = stopped_together(cluster, 2, [1])
    assert cluster.result("run", 0)["kind"] == "drain"
    check_agents(nodes, [1], "committed")
    assert wait_until(lambda: channel.commits("aws-pool", [AWS_VM]))  # the controller may now remove the VM
    resume_and_compare(cluster, 2, reference, step)


@pytest.mark.timeout(150)
def test_a_budget_too_small_for_any_save_writes_nothing(cluster: Cluster, reference: Reference) -> None:
    nodes = cluster.add_nodes(["aws", "aws"])
    job = cluster.launch("run", 2, [n.address for n in nodes], **PACED)
    cluster.wait_steps("run", 15)
    nodes[0].notice(lead=0.5)  # less than the 1 s safety margin: no budget at all
    assert cluster.finish(job) == [EXIT_GANG_STOP] * 2, cluster.stderr("run")
    step = stopped_together(cluster, 2, [0])
    for rank in range(2):
        result = cluster.result("run", rank)
        assert not result["committed"] and "cannot fit a save" in result["final_reason"]
    check_agents(nodes, [0], "skipped")
    newest = CheckpointManager(f"file://{cluster.out / 'ckpt'}").newest_verified_step()
    assert newest == step - step % 10  # the last periodic generation; no final one, no debris
    assert not [g for g in CheckpointManager(f"file://{cluster.out / 'ckpt'}").list() if not g.committed]
    resume_and_compare(cluster, 2, reference, newest)


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("world", "victim", "how", "bound"),
    [(4, 2, "SIGKILL", 10.0), (2, 1, "SIGSTOP", 3.0 + 10.0)],
    ids=["4-ranks-sigkill", "2-ranks-sigstop"],
)
def test_a_vanished_peer_ends_the_others_within_the_bound(
    cluster: Cluster, reference: Reference, world: int, victim: int, how: str, bound: float
) -> None:
    import signal

    nodes = cluster.add_nodes(["aws"] * world)
    job = cluster.launch("run", world, [n.address for n in nodes], GANG_TIMEOUT_FLOOR=3.0, **PACED)
    cluster.wait_steps("run", 25)
    signalled = time.monotonic()
    job.signal(victim, getattr(signal, how))
    survivors = [pid for r, pid in enumerate(job.pids) if r != victim]
    wait_until(lambda: not any(alive(pid) for pid in survivors), timeout=bound)
    took = time.monotonic() - signalled
    if how == "SIGSTOP":
        job.signal(victim, signal.SIGKILL)
    codes = cluster.finish(job)
    assert [c for r, c in enumerate(codes) if r != victim] == [EXIT_PEER_LOST] * (world - 1), cluster.stderr("run")
    assert took < bound
    for rank, node in enumerate(nodes):
        if rank == victim:
            continue
        gang = wait_until(lambda n=node: n.agent.state.gang)  # type: ignore[misc]
        assert (gang.role, gang.committed, gang.outcome) == ("peer", False, "peer-lost")
        assert gang.reason.startswith("peer lost")
        assert node.metric("spotgpu_agent_gang_stops_total", role="peer", outcome="peer-lost") == 1
    manager = CheckpointManager(f"file://{cluster.out / 'ckpt'}")
    newest = manager.newest_verified_step()
    assert newest is not None and newest >= 20 and newest % 10 == 0  # the last periodic generation is intact
    resume_and_compare(cluster, world, reference, newest)
