"""torch.distributed.checkpoint through GenerationWriter/Reader: 2 ranks, gloo on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _state(step: int, rank: int, mesh):
    from torch.distributed.tensor import Shard, distribute_tensor

    full = torch.arange(64, dtype=torch.float32).reshape(8, 8) * step
    return {
        "sharded": distribute_tensor(full, mesh, [Shard(0)]),  # each rank writes its half
        "replicated": torch.full((5,), float(step), dtype=torch.bfloat16),
        "meta": {"step": step, "tag": f"s{step}"},
        f"rank{rank}": torch.full((3,), rank * 100 + step, dtype=torch.int64),
    }


def _worker(rank: int, world: int, root: str) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    from spotgpu.checkpoint import CheckpointManager
    from spotgpu.checkpoint.dcp import GenerationReader, GenerationWriter, load_verified

    mesh = init_device_mesh("cpu", (world,))
    url = Path(root).as_uri()
    for step in (1, 2):
        writer = GenerationWriter(url, step=step)
        dcp.save(_state(step, rank, mesh), storage_writer=writer)
    dist.barrier()

    target = _state(0, rank, mesh)
    reader = GenerationReader(url)
    dcp.load(target, storage_reader=reader)
    assert reader.step == 2
    expected = _state(2, rank, mesh)
    assert torch.equal(target["sharded"].to_local(), expected["sharded"].to_local())
    assert torch.equal(target["replicated"], expected["replicated"])
    assert torch.equal(target[f"rank{rank}"], expected[f"rank{rank}"])
    assert target["meta"] == {"step": 2, "tag": "s2"}

    if rank == 0:
        report = CheckpointManager(url).verify(2)
        assert report.ok and report.objects_checked == 3, report  # DCP's metadata and one shard per rank
        # Corrupt rank 1's shard of step 2: every rank must fall back to step 1 together.
        (victim,) = Path(root).glob(f"shards/*/{CheckpointManager(url).list()[0].generation}/r00001-000.shard")
        victim.write_bytes(bytes([victim.read_bytes()[0] ^ 0xFF]) + victim.read_bytes()[1:])
    dist.barrier()
    target = _state(0, rank, mesh)
    assert load_verified(target, url) == 1
    assert torch.equal(target["sharded"].to_local(), _state(1, rank, mesh)["sharded"].to_local())
    assert target["meta"]["step"] == 1


@pytest.mark.timeout(90)
def test_two_rank_dcp_save_load_and_fallback(tmp_path):
    from ckpt_gloo import run_ranks

    run_ranks(_worker, 2, tmp_path, timeout=75)
    from spotgpu.checkpoint import CheckpointManager

    infos = CheckpointManager(tmp_path.as_uri()).list()
    assert [(i.step, i.world_size) for i in infos] == [(2, 2), (1, 2)]


# ---- the final-checkpoint path (issue 21: "the DCP adapter has no final-checkpoint path") ----


def _small_state(step: int) -> dict:
    return {"w": torch.full((64, 64), float(step)), "step": torch.tensor(step), "meta": {"step": step}}


def test_final_save_without_budget_writes_nothing(tmp_path):
    from spotgpu.checkpoint.dcp import DCPCheckpointManager

    mgr = DCPCheckpointManager(tmp_path.as_uri())
    for budget in (0, -3.0):
        result = mgr.save_final(5, _small_state(5), budget_seconds=budget)
        assert (result.committed, result.generation) == (False, None)
        assert "no time budget" in result.reason and "nothing written" in result.reason
    assert not list(tmp_path.rglob("*.*")) and mgr.last_save_seconds is None
    assert mgr.restore(_small_state(0)) is None  # a fresh start


def test_final_save_commits_within_budget_and_records_its_duration(tmp_path):
    from spotgpu.checkpoint.dcp import DCPCheckpointManager

    mgr = DCPCheckpointManager(tmp_path.as_uri())
    result = mgr.save_final(5, _small_state(5), budget_seconds=60)
    assert result.committed and result.generation and result.generation.startswith("000000000005-")
    assert mgr.last_save_seconds is not None and 0 < mgr.last_save_seconds <= result.seconds
    target = _small_state(0)
    restored = DCPCheckpointManager(tmp_path.as_uri()).restore(target)
    assert restored is not None and (restored.step, restored.generation) == (5, result.generation)
    assert torch.equal(target["w"], _small_state(5)["w"]) and target["meta"] == {"step": 5}
    again = mgr.save_final(5, _small_state(5), budget_seconds=60)  # the periodic save already took this step
    assert (again.committed, again.generation) == (True, result.generation)
    assert "already committed" in again.reason


@pytest.mark.parametrize(
    ("slow_path", "reason"),
    [
        ("/r00000-000.shard", "ran out while writing this rank's objects; cancelled"),
        ("dcp.metadata", "ran out while committing (DCP metadata and marker); cancelled"),
    ],
)
def test_final_save_over_budget_is_abandoned_and_names_the_phase(tmp_path, slow_path, reason):
    from ckpt_gloo import SlowStore

    from spotgpu.checkpoint.dcp import DCPCheckpointManager
    from spotgpu.storage.store import open_store

    url = tmp_path.as_uri()
    DCPCheckpointManager(url).save(4, _small_state(4))
    slow = SlowStore(open_store(url), lambda p: slow_path in p, seconds=3.0)
    mgr = DCPCheckpointManager(url, store=slow)
    result = mgr.save_final(5, _small_state(5), budget_seconds=1.5)
    assert (result.committed, result.generation) == (False, None)
    assert result.reason.startswith("budget of 1.5s ") and reason in result.reason, result.reason
    assert mgr.last_save_seconds is None
    assert result.seconds < 10
    assert not (tmp_path / "commits" / "000000000005.json").exists()
    target = _small_state(0)
    restored = DCPCheckpointManager(url).restore(target)
    assert restored is not None and restored.step == 4 and torch.equal(target["w"], _small_state(4)["w"])


def test_final_reason_names_the_phase_from_each_ranks_side():
    from spotgpu.checkpoint.dcp import COMMITTING, PLANNING, WRITING, BudgetExhausted, final_reason

    writing = {1: BudgetExhausted(1, WRITING)}
    assert "while waiting for rank 1's part (rank 1 was still writing its objects)" in final_reason(0, writing, 9)
    assert "while writing this rank's objects" in final_reason(1, writing, 9)
    committing = {0: BudgetExhausted(0, COMMITTING)}
    assert "while waiting for the commit marker" in final_reason(1, committing, 9)
    assert "while committing" in final_reason(0, committing, 9)
    assert final_reason(0, {1: OSError("disk full")}, 9) == "failed on rank 1: disk full"
    planning = {0: BudgetExhausted(0, PLANNING), 1: BudgetExhausted(1, PLANNING)}
    assert final_reason(1, planning, 9) == "budget of 9.0s ran out while planning the save (nothing written)"
    for text in (final_reason(0, writing, 9), final_reason(1, committing, 9)):
        assert "ran out while writing" not in text  # never, when this rank had finished writing


def _final_worker(rank: int, world: int, root: str) -> None:
    from ckpt_gloo import SlowStore, write_result
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    from spotgpu.checkpoint.dcp import DCPCheckpointManager
    from spotgpu.storage.store import open_store

    url = Path(root).as_uri()
    mesh = init_device_mesh("cpu", (world,))

    def state(step: int) -> dict:
        return {"w": distribute_tensor(torch.full((8, 4), float(step)), mesh, [Shard(0)]), "step": torch.tensor(step)}

    outcomes = {}
    mgr = DCPCheckpointManager(url)
    ok = mgr.save_final(1, state(1), 60)  # also warms DCP up, so planning the slow saves is quick
    outcomes["ok"] = [ok.committed, ok.generation, mgr.last_save_seconds]
    # Rank 1's disk is slow: rank 1 runs out writing, rank 0 (done) was waiting for rank 1's part.
    slow_rank1 = SlowStore(open_store(url), lambda p: rank == 1 and "/r00001-000.shard" in p, seconds=3.0)
    outcomes["slow_rank1"] = DCPCheckpointManager(url, store=slow_rank1).save_final(2, state(2), 1.5).reason
    # The coordinator is slow to commit: rank 1 (done) was waiting for the commit marker.
    slow_commit = SlowStore(open_store(url), lambda p: rank == 0 and p.endswith("dcp.metadata"), seconds=3.0)
    outcomes["slow_commit"] = DCPCheckpointManager(url, store=slow_commit).save_final(3, state(3), 1.5).reason
    target = state(0)
    restored = DCPCheckpointManager(url).restore(target)
    assert restored is not None and restored.step == 1  # the abandoned saves never count
    assert torch.equal(target["w"].full_tensor(), torch.full((8, 4), 1.0))
    write_result(root, "final", rank, outcomes)


@pytest.mark.timeout(90)
def test_two_rank_final_save_reasons_and_commit(tmp_path):
    from ckpt_gloo import read_results, run_ranks

    run_ranks(_final_worker, 2, tmp_path, timeout=75)
    r0, r1 = read_results(tmp_path, "final", 2)
    assert "ran out while waiting for rank 1's part" in r0["slow_rank1"], r0
    assert "ran out while writing this rank's objects" in r1["slow_rank1"], r1
    assert "ran out while committing" in r0["slow_commit"], r0
    assert "ran out while waiting for the commit marker" in r1["slow_commit"], r1
    assert r0["ok"][:2] == r1["ok"][:2] and r0["ok"][0] is True
    assert r0["ok"][2] > 0 and r1["ok"][2] > 0  # last_save_seconds on every rank
    assert sorted(p.name for p in (tmp_path / "commits").iterdir()) == ["000000000001.json"]


def test_a_failed_metadata_read_is_not_retried_as_rank_local_metadata(tmp_path):
    """DCP retries ``read_metadata(rank=...)`` without collectives, on that rank alone, when
    the reader's signature has a ``kwargs`` parameter: one rank would then leave the others
    waiting in the planning collective. The reader must be read once, collectively."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    from spotgpu.checkpoint.dcp import GenerationReader

    calls = []

    class Counting(GenerationReader):  # counts reads without touching read_metadata's signature
        def _candidates(self):
            calls.append(1)
            return super()._candidates()

    with pytest.raises(CheckpointException, match="no committed generation"):
        dcp.load({"w": torch.zeros(2)}, storage_reader=Counting(tmp_path.as_uri()), no_dist=True)
    assert calls == [1]


def _diverging_worker(rank: int, world: int, root: str) -> None:
    import torch.distributed as dist
    from ckpt_gloo import MissingOnThisRank, write_result

    from spotgpu.checkpoint.dcp import DCPCheckpointManager, load_verified
    from spotgpu.storage.store import open_store

    url = Path(root).as_uri()
    mgr = DCPCheckpointManager(url)
    for step in (1, 2):
        mgr.save(step, {"w": torch.full((4,), float(step))})
    dist.barrier()
    # Rank 1 cannot read step 2's metadata (an error that outlived the retries), so it picks
    # step 1 while the coordinator picks (and pins) step 2. Both must then agree on what to try next.
    store = MissingOnThisRank(open_store(url), lambda p: rank == 1 and "000000000002-" in p and "dcp.metadata" in p)
    target = {"w": torch.zeros(4)}
    step = load_verified(target, url, store=store)
    write_result(root, "diverging", rank, [step, target["w"].tolist()])


@pytest.mark.timeout(90)
def test_ranks_that_chose_different_generations_retry_the_same_one(tmp_path):
    from ckpt_gloo import read_results, run_ranks

    run_ranks(_diverging_worker, 2, tmp_path, timeout=60)  # before: one rank raised, the other hung
    assert read_results(tmp_path, "diverging", 2) == [[1, [1.0] * 4]] * 2
