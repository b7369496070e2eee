"""Rank bodies for the checkpoint-tier tests (run by ``ckpt_gloo.run_ranks`` on real gloo groups).

A *node* is a directory ``<root>/node<N>/local`` (its local tier) and a zone; each rank is told which
node it runs on, so a test can lose nodes between a save and a restore (delete their directories,
start the restore on a replacement's empty one), as a spot reclaim does.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager


def state_at(rank: int, step: int) -> dict[str, Any]:
    """What rank ``rank`` saves at ``step``: a few MiB, different per rank and step."""
    rng = np.random.default_rng(1000 * rank + step)
    return {"w": rng.standard_normal(300_000).astype(np.float32), "b": rng.integers(0, 255, 4096, dtype=np.uint8),
            "meta": json.dumps({"rank": rank, "step": step}).encode()}  # fmt: skip


def digest(state: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for key in sorted(state):
        value = state[key]
        h.update(key.encode())
        h.update(value.tobytes() if isinstance(value, np.ndarray) else bytes(value))
    return h.hexdigest()


def manager(root: str, rank: int, world: int, nodes: list[int], zones: list[str], durable_every: int = 2) -> TieredCheckpointManager:
    tier = LocalTier(Path(root) / f"node{nodes[rank]}" / "local", keep=2, peer_copies=1, durable_every=durable_every,
                     zone=zones[rank])  # fmt: skip
    return TieredCheckpointManager((Path(root) / "store").as_uri(), tier, rank=rank, world_size=world, session="run1")


def save_steps(rank: int, world: int, root: str, nodes: list[int], zones: list[str], steps: list[int],
               corrupt_arrival: int | None = None) -> None:  # fmt: skip
    """Save ``steps``; ``corrupt_arrival``: on this rank a byte of every copy flips in flight (after the wire,
    before the receiver has seen it: a bad transfer)."""
    if corrupt_arrival == rank:
        from spotgpu.checkpoint.tiered import transport

        original = transport._Writer.write

        def corrupting(self: Any, data: Any) -> None:
            flipped = bytearray(memoryview(data).cast("B"))
            flipped[len(flipped) // 2] ^= 0xFF  # the middle of the stream: the shard's data
            original(self, flipped)

        transport._Writer.write = corrupting  # type: ignore[method-assign]
    mgr = manager(root, rank, world, nodes, zones)
    holders = []
    for step in steps:
        mgr.save(step, state_at(rank, step))
        holders.append(mgr.node.markers()[0].holders)
    mgr.close(60)
    Path(root, f"saved-r{rank}.json").write_text(json.dumps({"holders": holders,
                                                             "uploads": [u.step for u in mgr.uploads() if u.error is None]}))  # fmt: skip


def restore_now(rank: int, world: int, root: str, nodes: list[int], zones: list[str]) -> None:
    mgr = manager(root, rank, world, nodes, zones)
    result = mgr.restore()
    assert result is not None
    Path(root, f"restored-r{rank}.json").write_text(json.dumps({
        "step": result.step, "source": result.source, "digest": digest(result.state),
        "expected": digest(state_at(rank, result.step)), "nbytes": result.nbytes, "notes": list(result.notes)}))  # fmt: skip
    mgr.close(10)
