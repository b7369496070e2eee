"""Background saves: snapshot to host memory on a budget, write on a thread.

The caller's thread copies the state chunk by chunk into pooled host buffers (the only
part that blocks training); a writer thread streams those chunks through the normal
commit protocol and returns each buffer to the pool once written. When the state is
larger than the budget, the copy waits for the writer to free space, so host memory
never exceeds the budget.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import numpy as np

from spotgpu.checkpoint.errors import CheckpointError
from spotgpu.checkpoint.results import GenerationInfo
from spotgpu.checkpoint.snapshot import ChunkPool, HostBudget, Item, chunk_views

Status = Literal["snapshotting", "writing", "committed", "failed"]


class SaveHandle:
    """Status and result of one background save."""

    def __init__(self, step: int) -> None:
        self.step = step
        self._status: Status = "snapshotting"
        self._done = threading.Event()
        self._info: GenerationInfo | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    def status(self) -> Status:
        return self._status

    def done(self) -> bool:
        return self._done.is_set()

    def finished(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` for the save to end either way; True once it has."""
        return self._done.wait(timeout)

    @property
    def error(self) -> BaseException | None:
        return self._error

    def wait(self, timeout: float | None = None) -> GenerationInfo:
        """The committed generation; raises TimeoutError, or the save's own error."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"save of step {self.step} still {self._status} after {timeout}s")
        if self._error is not None:
            raise self._error
        assert self._info is not None
        return self._info

    def _set_writing(self) -> None:
        with self._lock:
            if self._status == "snapshotting":
                self._status = "writing"

    def _finish(self, info: GenerationInfo | None, error: BaseException | None) -> None:
        with self._lock:
            self._info, self._error = info, error
            self._status = "committed" if error is None else "failed"
        self._done.set()


class PendingSave:
    """The one background save a manager has in flight (``_pending``), and how a caller waits for it."""

    _pending: SaveHandle | None = None

    def wait_pending(self, timeout: float | None = None) -> None:
        """Wait for the save in flight; raise what it raised (once: the next call, and the next
        save, go on). ``TimeoutError`` if it is still running."""
        pending = self._pending
        if pending is None:
            return
        if not pending.finished(timeout):
            raise TimeoutError(f"save of step {pending.step} still {pending.status()} after {timeout}s")
        self._pending = None
        if pending.error is not None:
            raise pending.error


class SnapshotPipe:
    """Chunks flowing from the caller's copy loop to the writer thread.

    The writer starts consuming only once the copy is done or the budget is full: on two
    cores, writing while copying slowed the copy (the time training is blocked) by ~60%
    in bench/checkpoint_io.py, for a ~10% earlier commit.
    """

    def __init__(self, budget: HostBudget, pool: ChunkPool, failed: Callable[[], bool], items: int) -> None:
        self.budget = budget
        self.pool = pool
        self.failed = failed
        # One queue per item: the writer may stream several items at once (in item
        # order, so the lowest unfinished item always has a consumer: no deadlock).
        self._queues: list[queue.SimpleQueue[tuple[np.ndarray | None, bool]]] = [
            queue.SimpleQueue() for _ in range(items)
        ]
        self._go = threading.Event()

    def fill(self, items: Sequence[Item]) -> bool:
        """Copy every item into host buffers (caller's thread; blocks when over budget).

        False if the writer failed meanwhile (its error is on the handle)."""
        done = 0
        try:
            for index, item in enumerate(items):
                views = list(chunk_views(item.view, self.pool.chunk))
                for n, view in enumerate(views):
                    if not self.budget.acquire(view.nbytes, abort=self.failed, on_block=self._go.set):
                        return False
                    try:
                        buf = self.pool.take(view.nbytes)
                        np.copyto(buf, np.frombuffer(view, dtype=np.uint8))
                    except BaseException:
                        self.budget.release(view.nbytes)
                        raise
                    self._queues[index].put((buf, n == len(views) - 1))
                done = index + 1
            return True
        finally:
            for q in self._queues[done:]:
                q.put((None, True))  # unblock a writer waiting on an item that will never come
            self._go.set()

    def chunks(self, index: int, _item: Item) -> Iterator[memoryview]:
        """The writer's side: chunks of item ``index``, freed once consumed."""
        self._go.wait()
        while True:
            buf, last = self._queues[index].get()
            if buf is None:
                raise CheckpointError(f"snapshot of item {index} was abandoned")
            try:
                yield buf.data
            finally:  # back in the pool before the budget lets the copy take another
                self.pool.give(buf)
                self.budget.release(buf.nbytes)
            if last:
                return

    def drain(self) -> None:
        """Free whatever the writer did not consume (after a failure)."""
        for q in self._queues:
            while True:
                try:
                    buf, _ = q.get_nowait()
                except queue.Empty:
                    break
                if buf is None:
                    continue
                self.pool.give(buf)
                self.budget.release(buf.nbytes)
