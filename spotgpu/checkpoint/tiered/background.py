"""The tier's save thread.

:class:`SaveThread` runs every rank's local commits (local write, peer copies, gang marker) one at a
time, in the order they were submitted, on one thread per rank. The commit protocol is collective
(gathers and point-to-point copies on the tier's save group), so its calls must come in the same
order on every rank: they do, because every rank submits the same saves in the same order (the same
steps, by the training loop's own agreement) and one thread runs them first in, first out. No other
thread touches that group.

The host copy a background save works from is not here: it is ``CheckpointManager.save_async``'s of
the node's world-size-1 manager (pooled chunks within a memory budget, reused from save to save, so a
steady run copies into pages already mapped, as DCP's async save copies into pinned memory).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from spotgpu.checkpoint.async_save import SaveHandle
from spotgpu.checkpoint.results import GenerationInfo


class SaveThread:
    """One thread, a FIFO of local commits; each ends its :class:`SaveHandle` (committed or failed)."""

    def __init__(self, name: str = "spotgpu-tier-save") -> None:
        self.name = name
        self._queue: queue.Queue[tuple[Callable[[], GenerationInfo], SaveHandle] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, commit: Callable[[], GenerationInfo], handle: SaveHandle) -> None:
        with self._lock:
            self._queue.put((commit, handle))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            commit, handle = job
            handle._set_writing()
            try:
                info = commit()
            except BaseException as err:  # reported through the handle, to the training thread
                handle._finish(None, err)
            else:
                handle._finish(info, None)

    def close(self, timeout: float | None = None) -> None:
        """Run what is queued (or give up after ``timeout``), then stop the thread."""
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout)
