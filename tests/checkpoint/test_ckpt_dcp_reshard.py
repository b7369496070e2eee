"""DCP resharding across world sizes (issue 21, item 4): a generation written by 2 gloo
ranks is restored by 1, 3 and 4 ranks through ``DCPCheckpointManager.restore``, each
with the new world's own state_dict; the parameters equal the saved ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SAVED_STEP = 7


def full_params(step: int) -> dict[str, torch.Tensor]:
    """The model's full (unsharded) parameters at ``step``, the same on every rank."""
    gen = torch.Generator().manual_seed(step)
    return {
        "layer1.weight": torch.randn(12, 16, generator=gen),  # 12 rows: 6/6, 12, 4/4/4, 3/3/3/3
        "layer2.weight": torch.randn(5, 12, generator=gen),  # 5 rows: uneven shards, an empty one at 4 ranks
        "layer2.bias": torch.randn(5, generator=gen).to(torch.bfloat16),
    }


def sharded_state(step: int, world: int) -> dict:
    """A training job's state_dict on this world: parameters sharded by rows (what FSDP2
    holds, as DTensors), a replicated 0-d step counter, plain Python metadata."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    params = {k: distribute_tensor(v, mesh, [Shard(0)]) for k, v in full_params(step).items()}
    return {"model": params, "step": torch.tensor(step), "meta": {"step": step, "lr": 0.25}}


def _save_two_ranks(rank: int, world: int, root: str) -> None:
    from spotgpu.checkpoint.dcp import DCPCheckpointManager

    mgr = DCPCheckpointManager(Path(root).as_uri())
    for step in (SAVED_STEP - 1, SAVED_STEP):
        assert mgr.save(step, sharded_state(step, world)).world_size == 2


def _restore_on(rank: int, world: int, root: str, expected_step: int = SAVED_STEP) -> None:
    from ckpt_gloo import write_result

    from spotgpu.checkpoint.dcp import DCPCheckpointManager

    target = sharded_state(0, world)  # this world's layout, other values
    restored = DCPCheckpointManager(Path(root).as_uri()).restore(target)
    assert restored is not None and restored.step == expected_step
    want = full_params(expected_step)
    shapes = {}
    for key, param in target["model"].items():
        assert torch.equal(param.full_tensor(), want[key]), key
        assert param.full_tensor().dtype == want[key].dtype, key
        shapes[key] = list(param.to_local().shape)
    assert target["step"].shape == () and int(target["step"]) == expected_step
    assert target["meta"] == {"step": expected_step, "lr": 0.25}
    write_result(root, f"reshard{world}", rank, shapes)


@pytest.fixture(scope="module")
def two_rank_generation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ckpt_gloo import run_ranks

    root = tmp_path_factory.mktemp("dcp-2-ranks")
    run_ranks(_save_two_ranks, 2, root, timeout=60)
    return root


@pytest.fixture
def store_copy(two_rank_generation: Path, tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(two_rank_generation, root)
    return root


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("world", "layer2_rows"),
    [(3, [2, 2, 1]), (4, [2, 2, 1, 0])],
)
def test_two_rank_generation_restores_resharded_on_more_ranks(store_copy: Path, world: int, layer2_rows: list[int]):
    from ckpt_gloo import read_results, run_ranks

    run_ranks(_restore_on, world, store_copy, timeout=60)
    shapes = read_results(store_copy, f"reshard{world}", world)
    assert [s["layer1.weight"][0] for s in shapes] == [12 // world] * world  # each rank got its new shard
    assert [s["layer2.weight"][0] for s in shapes] == layer2_rows


@pytest.mark.timeout(90)
def test_two_rank_generation_restores_on_one_rank(store_copy: Path):
    from ckpt_gloo import read_results, run_ranks

    run_ranks(_restore_on, 1, store_copy, timeout=60)
    assert read_results(store_copy, "reshard1", 1)[0]["layer1.weight"] == [12, 16]


def test_two_rank_generation_restores_into_plain_tensors_without_a_process_group(store_copy: Path):
    """The consolidation case: one process, no process group, plain full tensors."""
    from spotgpu.checkpoint.dcp import DCPCheckpointManager

    target = {
        "model": {k: torch.zeros_like(v) for k, v in full_params(0).items()},
        "step": torch.tensor(0),
        "meta": {"step": 0, "lr": 0.0},
    }
    restored = DCPCheckpointManager(store_copy.as_uri()).restore(target)
    assert restored is not None and restored.step == SAVED_STEP
    for key, want in full_params(SAVED_STEP).items():
        assert torch.equal(target["model"][key], want), key
    assert int(target["step"]) == SAVED_STEP and target["meta"] == {"step": SAVED_STEP, "lr": 0.25}


@pytest.mark.timeout(90)
def test_a_corrupt_newest_generation_moves_every_rank_of_the_new_world_back_together(store_copy: Path):
    from ckpt_gloo import run_ranks

    newest = next((store_copy / "commits").glob(f"{SAVED_STEP:012d}.json"))
    generation = newest.read_text().split('"generation":"')[1].split('"')[0]
    (victim,) = store_copy.glob(f"shards/*/{generation}/r00001-000.shard")
    raw = victim.read_bytes()
    victim.write_bytes(bytes([raw[0] ^ 0xFF]) + raw[1:])  # one flipped byte in rank 1's shard
    run_ranks(_restore_on, 3, store_copy, SAVED_STEP - 1, timeout=60)


# ---- the recipe in docs/checkpoints.md, exactly as written ------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "checkpoints.md"
SECTION = "## Shapes, dtypes and DCP resharding"


def doc_recipe() -> str:
    section = DOC.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    assert len(blocks) == 1, "the section has one recipe; test any new one too"
    return blocks[0]


def _run_recipe(rank: int, world: int, root: str, code: str) -> None:
    os.environ["CKPT_URL"] = Path(root).as_uri()
    exec(compile(code, str(DOC), "exec"), {"__name__": "__main__"})


@pytest.mark.timeout(120)
def test_docs_recipe_runs_on_2_then_3_then_1_ranks(tmp_path: Path):
    from ckpt_gloo import run_ranks

    from spotgpu.checkpoint import CheckpointManager
    from spotgpu.checkpoint.dcp import DCPCheckpointManager

    code = doc_recipe()
    torch.manual_seed(0)
    initial = torch.nn.Linear(16, 12).state_dict()
    for world, newest, steps_trained in ((2, 2, 3), (3, 5, 6), (1, 8, 9)):
        run_ranks(_run_recipe, world, tmp_path, code, timeout=60, init=False)
        infos = [i for i in CheckpointManager(tmp_path.as_uri()).list() if i.committed]
        assert (infos[0].step, infos[0].world_size) == (newest, world)
        target = {"model": {k: torch.zeros_like(v) for k, v in initial.items()}, "step": torch.tensor(0)}
        restored = DCPCheckpointManager(tmp_path.as_uri()).restore(target)
        assert restored is not None and restored.step == newest and int(target["step"]) == newest
        for key, value in initial.items():
            want = value.clone()
            for _ in range(steps_trained):  # the recipe's training step, in the same float order
                want.add_(1.0)
            assert torch.equal(target["model"][key], want), key
    assert [i.step for i in CheckpointManager(tmp_path.as_uri()).list()] == [8, 6, 5, 4, 2, 0]


# ---- the gang over DCP: one agreed restore, one final checkpoint with the gang's budget ----------


def _gang_restore_on(rank: int, world: int, root: str, expected_step: int) -> None:
    from ckpt_gloo import write_result

    from spotgpu.checkpoint.dcp import DCPCheckpointManager
    from spotgpu.gang import Gang

    target = sharded_state(0, world)
    restored = Gang(None).restore(DCPCheckpointManager(Path(root).as_uri()), state_dict=target)
    assert restored is not None and restored.step == expected_step
    want = full_params(expected_step)
    assert all(torch.equal(p.full_tensor(), want[k]) for k, p in target["model"].items())
    write_result(root, f"gang{world}", rank, {"step": restored.step})


def _gang_final_then_stop(rank: int, world: int, root: str, budget: float) -> None:
    """A stop agreed by the gang (as should_stop leaves it), then its final checkpoint via DCP."""
    import time as clock

    from ckpt_gloo import write_result

    from spotgpu.checkpoint.dcp import DCPCheckpointManager
    from spotgpu.gang import Gang, GangStop

    gang = Gang(None)
    gang.stop = GangStop(SAVED_STEP + 3, clock.time() + budget, (1,), "preempt", "final", "preempt on rank(s) 1")
    result = gang.final_checkpoint(DCPCheckpointManager(Path(root).as_uri()), SAVED_STEP + 3,
                                   sharded_state(SAVED_STEP + 3, world))  # fmt: skip
    write_result(root, f"final{world}", rank, {"committed": result.committed, "reason": result.reason})


@pytest.mark.timeout(120)
def test_the_gang_restores_a_dcp_generation_resharded_and_commits_its_final_checkpoint(store_copy: Path):
    """Issue 21 item 4: Gang.restore and Gang.final_checkpoint take the DCP manager too. 2 ranks
    wrote the store; 3 ranks agree on its newest step (resharded), take the gang's final DCP
    checkpoint, and 1 rank then restores that final generation."""
    from ckpt_gloo import read_results, run_ranks

    run_ranks(_gang_restore_on, 3, store_copy, SAVED_STEP, timeout=60)
    assert [r["step"] for r in read_results(store_copy, "gang3", 3)] == [SAVED_STEP] * 3
    run_ranks(_gang_final_then_stop, 3, store_copy, 60.0, timeout=60)
    finals = read_results(store_copy, "final3", 3)
    assert all(f["committed"] for f in finals), finals
    assert all("committed by all 3 ranks" in f["reason"] for f in finals)
    run_ranks(_gang_restore_on, 1, store_copy, SAVED_STEP + 3, timeout=60)
    # no budget: nobody writes, every rank says why, the newest generation stays the final one
    run_ranks(_gang_final_then_stop, 2, store_copy, 0.0, timeout=60)
    skipped = read_results(store_copy, "final2", 2)
    assert not any(f["committed"] for f in skipped) and all("cannot fit a save" in f["reason"] for f in skipped)
