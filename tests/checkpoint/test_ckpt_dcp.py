"""torch.distributed.checkpoint through GenerationWriter/Reader: 2 ranks, gloo on loopback."""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _state(step: int, rank: int, mesh):
    from torch.distributed.tensor import Shard, distribute_tensor

    full = torch.arange(64, dtype=torch.float32).reshape(8, 8) * step
    return {
        "sharded": distribute_tensor(full, mesh, [Shard(0)]),  # each rank writes its half
        "replicated": torch.full((5,), float(step), dtype=torch.bfloat16),
        "meta": {"step": step, "tag": f"s{step}"},
        f"rank{rank}": torch.full((3,), rank * 100 + step, dtype=torch.int64),
    }


def _worker(rank: int, world: int, port: int, root: str) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    from spotgpu.checkpoint import CheckpointManager
    from spotgpu.checkpoint.dcp import GenerationReader, GenerationWriter, load_verified

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=dt.timedelta(seconds=60)
    )
    try:
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
            assert report.ok and report.objects_checked >= 4, report
            # Corrupt rank 1's shard of step 2: every rank must fall back to step 1 together.
            gen = Path(root) / "generations" / CheckpointManager(url).list()[0].generation / "r00001"
            victim = sorted(gen.iterdir())[0]
            victim.write_bytes(b"\xff" + victim.read_bytes()[1:])
        dist.barrier()
        target = _state(0, rank, mesh)
        assert load_verified(target, url) == 1
        assert torch.equal(target["sharded"].to_local(), _state(1, rank, mesh)["sharded"].to_local())
        assert target["meta"]["step"] == 1
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(180)
def test_two_rank_dcp_save_load_and_fallback(tmp_path):
    import torch.multiprocessing as tmp

    tmp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    from spotgpu.checkpoint import CheckpointManager

    infos = CheckpointManager(tmp_path.as_uri()).list()
    assert [(i.step, i.world_size) for i in infos] == [(2, 2), (1, 2)]
