"""The Hugging Face and Lightning callbacks on 2 gloo ranks, each on a simulated VM with a local tier of
its own (``SPOTGPU_LOCAL_DIR``, ``SPOTGPU_ZONE`` and the agent config's ``localTier``, as the bootstrap
sets them on a pool with ``checkpointTiers``); the jobs are the unchanged hf_job.py / lightning_job.py.

The first run saves at steps 4, 8 and 12 and is stopped at 13 by a notice to rank 1's VM: every save
lands in both nodes' tiers (each node holds its own part and its peer's copy), the store gets every
2nd (8) in the background and the gang's final checkpoint (13) within its budget. A restart then
restores each rank from the nearest verified copy, which its agent's ``restored`` record names: its
own tier, the peer's copy when its node's tier was wiped (a replacement VM), the store when both
were; the resumed run equals an uninterrupted one bit for bit, and the Trainer's restored
``checkpoint-13`` is byte for byte what the first run wrote.

The periodic save of 12 is still in flight when the notice comes (``--hold-commit 12``,
commit_hold.py: its background commit waits for the final checkpoint to begin), so the final
checkpoint first lets it finish, and every restart above is one after such a notice.

Defect (audit of docs/checkpoints.md): the callbacks always built a plain ``CheckpointManager`` and
restored from ``manager.store``: every save went to the store, every restore read it.
Defect (periodic saves blocked training): the callbacks saved periodically with the tier's ``save``,
so training waited for the local write and the peer copies on every periodic save.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from commit_hold import events
from integ_testkit import nodes, ranks, read_json, wait_all, wait_for

from spotgpu.checkpoint import CheckpointManager
from spotgpu.checkpoint.tiered.node import NodeTier, job_key
from spotgpu.gang import EXIT_GANG_STOP
from spotgpu.models.tiers import LOCAL_DIR_ENV, ZONE_ENV

HERE = Path(__file__).parent
JOBS = {"hf": HERE / "hf_job.py", "lightning": HERE / "lightning_job.py"}
WORLD, STEPS, STOP_AT = 2, 20, 13  # saves at 4, 8, 12 (every_steps=4), the gang's final one at 13
IN_FLIGHT = 12  # the periodic save whose commit is still running when the notice comes
ZONES = ["zone-a", "zone-b"]


def store_url(root: Path) -> str:
    return (root / "store").as_uri()


def tier_dir(root: Path, rank: int) -> Path:
    return root / f"node{rank}" / "local"


def vm_envs(root: Path) -> list[dict[str, str]]:
    """Each rank's VM: its tier, its zone, an agent config whose durable interval is 2 checkpoint intervals."""
    config = root / "agent.json"
    config.write_text(json.dumps({"checkpointIntervalSeconds": 600, "localTier": {
        "path": "/var/lib/spotgpu/local", "keep": 2, "peerCopies": 1, "durableIntervalSeconds": 1200, "ramDiskGiB": 1}}))  # fmt: skip
    return [{LOCAL_DIR_ENV: str(tier_dir(root, r)), ZONE_ENV: ZONES[r], "SPOTGPU_AGENT_CONFIG": str(config)}
            for r in range(WORLD)]  # fmt: skip


def stopped_run(job: str, root: Path) -> Path:
    """The first run: a notice to rank 1's VM at step 13; every rank exits 75 after the final checkpoint."""
    first = root / "interrupted"
    with nodes(WORLD) as vms:
        args = [str(first), store_url(root), "--steps", str(STEPS), "--stop-at", str(STOP_AT), "--noticed-rank", "1",
                "--hold-commit", str(IN_FLIGHT)]  # fmt: skip
        with ranks(JOBS[job], args, WORLD, [vm.address for vm in vms], first, envs=vm_envs(root)) as procs:
            wait_for(first / "ready-r1", 150, procs, first)
            vms[1].fake.raise_preempted()
            assert wait_all(procs, 120, first) == [EXIT_GANG_STOP] * WORLD
    for rank in range(WORLD):
        run = read_json(first / f"result-r{rank}-from0.json")["run"]
        assert (run["stop"], run["final"]) == (STOP_AT, True), run
    return root


@pytest.fixture(scope="module")
def hf_stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stopped_run("hf", tmp_path_factory.mktemp("hf-tiers"))


@pytest.fixture(scope="module")
def lightning_stopped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stopped_run("lightning", tmp_path_factory.mktemp("lightning-tiers"))


def copy_of(saved: Path, tmp_path: Path) -> Path:
    """The stopped gang's VMs and store at another path, for one restart (a tier names a job by its store URL)."""
    root = tmp_path / "gang"
    shutil.copytree(saved, root, symlinks=True)
    old, new = job_key(store_url(saved)), job_key(store_url(root))
    for rank in range(WORLD):
        if (tier_dir(root, rank) / old).exists():
            (tier_dir(root, rank) / old).rename(tier_dir(root, rank) / new)
    return root


def restart(job: str, root: Path, wiped: list[int]) -> list[str]:
    """Replace the VMs in ``wiped`` (their tiers start empty), restart the job, let it finish and train an
    uninterrupted reference; each rank's restore source, as its agent's ``restored`` record says."""
    for rank in wiped:
        shutil.rmtree(tier_dir(root, rank))
    second = root / "resumed"
    with nodes(WORLD) as vms:
        args = [str(second), store_url(root), "--steps", str(STEPS), "--then-reference"]
        with ranks(JOBS[job], args, WORLD, [vm.address for vm in vms], second, envs=vm_envs(root)) as procs:
            assert wait_all(procs, 180, second) == [0] * WORLD
        records = [vm.agent.state.restored for vm in vms]
    assert all(r is not None and r.step == STOP_AT for r in records), records
    for rank in range(WORLD):
        results = read_json(second / f"result-r{rank}-from{STOP_AT}.json")
        assert results["run"]["restored"] == STOP_AT
        before = read_json(root / "interrupted" / f"run-losses-r{rank}-from0.json")
        after = read_json(second / f"run-losses-r{rank}-from{STOP_AT}.json")
        assert sorted(map(int, after)) == list(range(STOP_AT + 1, STEPS + 1))
        assert {**before, **after} == read_json(second / f"reference-losses-r{rank}-from0.json")
        assert results["run"]["params"] == results["reference"]["params"]
    return [str(r.source) for r in records if r is not None]


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.timeout(400)
@pytest.mark.parametrize("job", ["hf", "lightning"])
def test_every_save_lands_in_both_tiers_and_the_store_gets_every_second(
    job: str, hf_stopped: Path, lightning_stopped: Path
) -> None:
    root = {"hf": hf_stopped, "lightning": lightning_stopped}[job]
    url = store_url(root)
    assert [i.step for i in CheckpointManager(url).list() if i.committed] == [STOP_AT, 8]  # not 4, not 12
    for rank in range(WORLD):
        tier = NodeTier(tier_dir(root, rank), url, keep=2)
        newest = tier.markers()[0]
        assert {m.step for m in tier.markers()} >= {12, STOP_AT}
        assert newest.step == STOP_AT and newest.holders == {0: [1], 1: [0]}  # each part's copy on the other node
        assert tier.shards() == [0, 1] and all(tier.committed(s, STOP_AT) == newest.generation for s in (0, 1))


@pytest.mark.timeout(400)
@pytest.mark.parametrize("job", ["hf", "lightning"])
def test_training_goes_on_while_a_periodic_save_commits_and_the_final_checkpoint_waits_for_it(
    job: str, hf_stopped: Path, lightning_stopped: Path
) -> None:
    """On every rank: the callback returned from the save of 12 before its commit ended, the notice's final
    checkpoint began while that commit was still running, and the final one (13) committed after it."""
    first = {"hf": hf_stopped, "lightning": lightning_stopped}[job] / "interrupted"
    for rank in range(WORLD):
        log = events(first, rank)
        at = log.index
        assert log.count(("commit-held", IN_FLIGHT)) == 1, log
        assert at(("periodic-returned", IN_FLIGHT)) < at(("commit-ended", IN_FLIGHT)), log  # training went on
        assert at(("final-started", STOP_AT)) < at(("commit-ended", IN_FLIGHT)), log  # the notice came mid-commit
        assert at(("commit-ended", IN_FLIGHT)) < at(("commit-ended", STOP_AT)) < at(("final-returned", STOP_AT)), log


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("wiped", "sources"), [([], ["local", "local"]), ([1], ["local", "peer"]), ([0, 1], ["store", "store"])],
    ids=["nothing-lost", "node1-replaced", "both-replaced"],
)
def test_hf_restart_restores_from_the_nearest_copy_bit_for_bit(
    hf_stopped: Path, tmp_path: Path, wiped: list[int], sources: list[str]
) -> None:
    root = copy_of(hf_stopped, tmp_path)
    assert restart("hf", root, wiped) == sources
    first = root / "interrupted"
    for rank in range(WORLD):  # what the Trainer resumed from: rank 0's files and this rank's own, as written
        written = {**files_of(first / "run-r0" / f"checkpoint-{STOP_AT}"),
                   **files_of(first / f"run-r{rank}" / f"checkpoint-{STOP_AT}")}  # fmt: skip
        assert files_of(root / "resumed" / f"run-r{rank}" / f"checkpoint-{STOP_AT}") == written


@pytest.mark.timeout(400)
def test_lightning_restart_after_rank0s_vm_was_replaced_reads_its_part_from_the_peer(
    lightning_stopped: Path, tmp_path: Path
) -> None:
    """Rank 0 (whose ``.ckpt`` every rank resumes from) gets its part from rank 1's node, then sends it on."""
    assert restart("lightning", copy_of(lightning_stopped, tmp_path), [0]) == ["peer", "local"]
