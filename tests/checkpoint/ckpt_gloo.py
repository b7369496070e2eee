"""Real gloo process groups for the DCP tests: N ranks (forked from a fork server) on
loopback, a hard timeout, hung ranks killed by PID, every rank's exit code checked.

A worker is ``fn(rank, world, root, *args)`` at module level (it is pickled by name);
it runs inside an initialised process group and may leave JSON results under ``root``."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing as mp
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spotgpu.storage.store import Store

#: A collective that waits longer than this fails the rank instead of hanging it.
COLLECTIVE_TIMEOUT = dt.timedelta(seconds=30)
#: Imported once by the fork server; every rank of every test forks from it (a cold
#: ``import torch`` takes 5-12 s on the loaded 2-core test box).
PRELOAD = ["torch", "torch.distributed.checkpoint", "torch.distributed.tensor", "spotgpu.checkpoint.dcp"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(
    fn: Callable[..., None], rank: int, world: int, port: int, root: str, args: tuple[Any, ...], init: bool
) -> None:
    import torch.distributed as dist

    if not init:  # the worker starts the group itself, from torchrun's environment variables
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        fn(rank, world, root, *args)
        return
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT
    )
    try:
        fn(rank, world, root, *args)
    finally:
        dist.destroy_process_group()


def run_ranks(
    fn: Callable[..., None], world: int, root: Path, *args: Any, timeout: float = 60.0, init: bool = True
) -> None:
    """Run ``fn`` on ``world`` gloo ranks; raise if any rank fails or is still running at ``timeout``.
    ``init=False``: no group is started; the ranks get torchrun's RANK/WORLD_SIZE/MASTER_* instead."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # torch is imported once, not once per rank per test
    port = free_port()
    procs = [
        ctx.Process(target=_entry, args=(fn, r, world, port, str(root), args, init), daemon=True) for r in range(world)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    hung: list[int] = []
    try:
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
    finally:
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGKILL)
                p.join(5)
    assert not hung, f"ranks {hung} still running after {timeout}s (killed)"
    codes = [p.exitcode for p in procs]
    assert codes == [0] * world, f"exit codes {codes}"


def write_result(root: str, name: str, rank: int, value: Any) -> None:
    Path(root, f"{name}-r{rank}.json").write_text(json.dumps(value))


def read_results(root: Path, name: str, world: int) -> list[Any]:
    return [json.loads((root / f"{name}-r{r}.json").read_text()) for r in range(world)]


class SlowStore:
    """A store whose ``put`` of matching paths first sleeps (a slow disk or upload)."""

    def __init__(self, inner: Store, match: Callable[[str], bool], seconds: float) -> None:
        self.inner, self.match, self.seconds = inner, match, seconds

    def put(self, path: str, data: Any) -> None:
        if self.match(path):
            time.sleep(self.seconds)
        self.inner.put(path, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class MissingOnThisRank:
    """A store that, on one rank only, cannot read the matching paths (a transient error)."""

    def __init__(self, inner: Store, match: Callable[[str], bool]) -> None:
        self.inner, self.match = inner, match

    def _check(self, path: str) -> None:
        from spotgpu.checkpoint.errors import ObjectMissingError

        if self.match(path):
            raise ObjectMissingError(path)

    def get(self, path: str) -> bytearray:
        self._check(path)
        return self.inner.get(path)

    def get_into_streamed(self, path: str, out: Any, on_chunk: Any) -> None:
        self._check(path)
        self.inner.get_into_streamed(path, out, on_chunk)

    def get_range_into(self, path: str, start: int, targets: Any, on_piece: Any = None) -> None:
        self._check(path)
        self.inner.get_range_into(path, start, targets, on_piece)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
