"""Issue 32 item 5: stores written by the previous release (format 1, one object per value
under ``generations/``) still restore, verify and retire, next to format-2 generations.

The fixture under ``fixtures/format1`` was written by the code before issue 32 (its README
has the script), byte for byte."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spotgpu.checkpoint import CheckpointManager, reader
from spotgpu.checkpoint.manifest import LEGACY_FORMAT

FIXTURE = Path(__file__).parent / "fixtures" / "format1"


def old_state(rank: int, step: int) -> dict[str, Any]:
    """What the fixture's script saved (its ``state`` function)."""
    return {
        "w": (np.arange(12, dtype=np.float32).reshape(3, 4) + rank * 100 + step),
        "b16": np.arange(5, dtype=">i2") * (rank + 1),
        "scalar": np.array(3.5 + rank),
        "empty": np.zeros((2, 0), dtype=np.int64),
        "meta": f"rank={rank} step={step}".encode(),
    }


def same(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return set(got) == set(want) and all(
        (np.array_equal(got[k], v) and got[k].dtype == v.dtype and got[k].shape == v.shape)
        if isinstance(v, np.ndarray)
        else got[k] == v
        for k, v in want.items()
    )


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(FIXTURE / "plain", root)
    return root


def test_the_fixture_is_format_1(old_store: Path) -> None:
    mgr = CheckpointManager(old_store.as_uri(), world_size=2, session="reader")
    record = reader.read_commit(mgr.store, 7)
    assert record.format == LEGACY_FORMAT and (old_store / "generations").is_dir()


@pytest.mark.parametrize("rank", [0, 1])
def test_an_old_generation_restores_on_each_rank(old_store: Path, rank: int) -> None:
    mgr = CheckpointManager(old_store.as_uri(), rank=rank, world_size=2, session="reader")
    restored = mgr.restore()
    assert restored is not None and restored.step == 7 and restored.skipped == []
    assert same(restored.state, old_state(rank, 7))
    into = {"w": np.zeros((3, 4), dtype=np.float32)}
    again = mgr.restore(max_step=3, into=into)
    assert again is not None and again.state["w"] is into["w"] and same(again.state, old_state(rank, 3))


def test_old_generations_verify_list_and_retire_next_to_new_ones(old_store: Path) -> None:
    url = old_store.as_uri()
    assert CheckpointManager(url, world_size=2, session="v").verify(7).ok
    ranks = [CheckpointManager(url, rank=r, world_size=2, session="new", keep=2) for r in (0, 1)]
    import threading

    threads = [threading.Thread(target=m.save, args=(9, old_state(m.rank, 9))) for m in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [i.step for i in ranks[0].list()] == [9, 7]  # keep=2 retired step 3 (format 1)
    assert not list(old_store.glob("generations/000000000003-*/*"))
    for rank in (0, 1):
        restored = CheckpointManager(url, rank=rank, world_size=2, session="r").restore()
        assert restored is not None and restored.step == 9 and same(restored.state, old_state(rank, 9))
        older = CheckpointManager(url, rank=rank, world_size=2, session="r").restore(max_step=8)
        assert older is not None and older.step == 7 and same(older.state, old_state(rank, 7))


def test_an_old_generation_restores_from_s3(s3_server: dict[str, Any]) -> None:
    from spotgpu.storage.store import open_store

    url = f"s3://ckpt/old-{uuid.uuid4().hex[:8]}"
    store = open_store(url, **s3_server)
    for path in (FIXTURE / "plain").rglob("*"):
        if path.is_file():
            store.put(path.relative_to(FIXTURE / "plain").as_posix(), path.read_bytes())
    restored = CheckpointManager(url, store=store, rank=1, world_size=2, session="s").restore()
    assert restored is not None and restored.step == 7 and same(restored.state, old_state(1, 7))


def test_an_old_dcp_generation_restores(tmp_path: Path) -> None:
    import torch

    from spotgpu.checkpoint.dcp import DCPCheckpointManager

    root = tmp_path / "dcp"
    shutil.copytree(FIXTURE / "dcp", root)
    expected = torch.load(FIXTURE / "dcp_expected.pt", weights_only=True)
    target = {
        "model": {k: torch.zeros_like(v) for k, v in expected["model"].items()},
        "step": torch.tensor(0),
        "extra": {"lr": 0.0},
    }
    restored = DCPCheckpointManager(root.as_uri()).restore(target)
    assert restored is not None and restored.step == 5
    for key, value in expected["model"].items():
        assert torch.equal(target["model"][key], value), key
    assert int(target["step"]) == 5 and target["extra"] == {"lr": 0.1}
