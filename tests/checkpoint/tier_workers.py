"""Rank bodies for the checkpoint-tier tests (run by ``ckpt_gloo.run_ranks`` on real gloo groups).

A *node* is a directory ``<root>/node<N>/local`` (its local tier) and a zone; each rank is told which
node it runs on, so a test can lose nodes between a save and a restore (delete their directories,
start the restore on a replacement's empty one), as a spot reclaim does.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
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


# --- the save thread (issue 33 leftover: peer copies block the save) -----------------------------------------
class Gate:
    """Holds the save thread's peer exchange until the training thread opens it (or ``hold`` seconds pass)."""

    def __init__(self, mgr: TieredCheckpointManager, hold: float) -> None:
        self.entered, self.opened, self.left = threading.Event(), threading.Event(), threading.Event()
        self.thread: str | None = None
        original = mgr.save_link.exchange

        def gated(*args: Any, **kwargs: Any) -> Any:
            self.thread = threading.current_thread().name
            self.entered.set()
            self.opened.wait(hold)
            try:
                return original(*args, **kwargs)
            finally:
                self.left.set()

        mgr.save_link.exchange = gated  # type: ignore[method-assign]


def slow_exchange(rank: int, world: int, root: str) -> None:
    """save_async returns while the peer exchange is held; training's own collectives go on meanwhile; the
    generation counts (marker, handle) only once the copies landed."""
    import torch
    import torch.distributed as dist

    mgr = manager(root, rank, world, [0, 1], ["a", "b"], durable_every=100)
    gate = Gate(mgr, hold=60.0)
    handle = mgr.save_async(10, state_at(rank, 10))
    out: dict[str, Any] = {"blocked": mgr.last_blocked_seconds, "entered": gate.entered.wait(30)}
    out["status_while_held"] = handle.status()
    out["done_while_held"] = handle.done()
    out["markers_while_held"] = [m.step for m in mgr.node.markers()]
    grads = torch.ones(4) * (rank + 1)
    dist.all_reduce(grads)  # a training step's collective on the job's group, while the save thread is mid-save
    out["allreduce"] = grads.tolist()
    gate.opened.set()
    info = handle.wait(60)
    out.update(committed=info.committed, step=info.step, thread=gate.thread,
               markers=[m.step for m in mgr.node.markers()], holders=mgr.node.markers()[0].holders,
               phases=mgr.last_save_phases)  # fmt: skip
    mgr.close(30)
    Path(root, f"slow-r{rank}.json").write_text(json.dumps(out))


class NoticeClient:
    """The gang's view of an agent: rank ``noticed`` has a final notice with ``budget`` seconds left."""

    def __init__(self, rank: int, noticed: int, budget: float) -> None:
        self.noticed = rank == noticed
        self.notice = SimpleNamespace(kind="preempt", budget_deadline=time.time() + budget) if self.noticed else None
        self.reports: list[dict[str, Any]] = []

    def should_stop(self) -> bool:
        return self.noticed

    def checkpoint_requested(self) -> str | None:
        return None

    def mark_served(self) -> None:
        pass

    def report(self, result: Any, checkpoint: str = "final", step: int | None = None, **kw: Any) -> None:
        self.reports.append({"committed": result.committed, "reason": result.reason, "checkpoint": checkpoint,
                             "step": step, "outcome": kw.get("outcome")})  # fmt: skip

    def report_restore(self, *a: Any, **kw: Any) -> None:
        pass

    def report_first_step(self, step: int) -> None:
        pass


def notice_during_copy(rank: int, world: int, root: str, budget: float, hold: float) -> None:
    """A periodic save_async of step 10 is mid-copy (held ``hold`` s) when a notice to rank 1 stops the gang at
    step 11: the final save waits for step 10's copies, then commits 11 locally and on the peer, then the store."""
    from spotgpu.gang import Gang

    mgr = manager(root, rank, world, [0, 1], ["a", "b"], durable_every=100)
    gate = Gate(mgr, hold=hold)
    client = NoticeClient(rank, noticed=1, budget=budget)
    gang = Gang(client)  # type: ignore[arg-type]
    handle = mgr.save_async(10, state_at(rank, 10))
    assert gate.entered.wait(30), "the save thread never reached the peer exchange"
    stop = gang.should_stop(11)  # the gang's agreement on the job's group, with step 10's copies in flight
    in_flight = not handle.done()
    result = gang.final_checkpoint(mgr, 11, state_at(rank, 11))
    mgr.close(60)
    markers = {m.step: m.holders for m in mgr.node.markers()}
    Path(root, f"notice-r{rank}.json").write_text(json.dumps({
        "stop": stop, "in_flight": in_flight, "committed": result.committed, "reason": result.reason,
        "seconds": result.seconds, "periodic": handle.status(), "markers": {str(k): v for k, v in markers.items()},
        "store": [i.step for i in mgr.list() if i.committed], "reports": client.reports}))  # fmt: skip


def bad_state_on_one_rank(rank: int, world: int, root: str) -> None:
    """Rank 1 hands save_async a state it cannot copy: the save fails on both ranks, naming rank 1 (the other
    rank's save thread is not left waiting for it), and the next save goes on."""
    mgr = manager(root, rank, world, [0, 1], ["a", "b"], durable_every=100)
    state: dict[str, Any] = {"x": object()} if rank == 1 else state_at(rank, 10)
    handle = mgr.save_async(10, state)
    assert handle.finished(60), "the save of step 10 never ended"
    error, raised = str(handle.error), "nothing"
    try:
        mgr.wait_pending()  # the failure is raised once, as CheckpointManager's is, then the next save goes on
    except Exception as err:
        raised = str(err)
    info = mgr.save(20, state_at(rank, 20))
    mgr.close(30)
    Path(root, f"bad-r{rank}.json").write_text(json.dumps({"error": error, "raised": raised, "next": info.step,
                                                           "markers": [m.step for m in mgr.node.markers()]}))  # fmt: skip


def many_rounds(rank: int, world: int, root: str, chunk: int) -> None:
    """Chunks of ``chunk`` bytes (so a copy takes many transfer rounds, two in flight), two peer copies per shard:
    every copy lands whole and checked; then this rank restores its own shard from a peer's copy."""
    from spotgpu.checkpoint.tiered import transport

    transport.CHUNK_BYTES = chunk
    zones = ["a", "b", "c"][:world]
    tier = LocalTier(Path(root) / f"node{rank}" / "local", keep=2, peer_copies=2, durable_every=100, zone=zones[rank])
    mgr = TieredCheckpointManager((Path(root) / "store").as_uri(), tier, rank=rank, world_size=world, session="run1")
    for step in (1, 2):
        mgr.save_async(step, state_at(rank, step))
    mgr.wait_pending(60)
    holders = mgr.node.markers()[0].holders
    mgr.close(30)
    Path(root, f"rounds-r{rank}.json").write_text(json.dumps({"holders": holders}))
