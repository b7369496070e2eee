"""The tier's save thread, and the host copy a background save works from.

:class:`SaveThread` runs every rank's local commits (local write, peer copies, gang marker) one at a
time, in the order they were submitted, on one thread per rank. The commit protocol is collective
(gathers and point-to-point copies on the tier's save group), so its calls must come in the same
order on every rank: they do, because every rank submits the same saves in the same order (the same
steps, by the training loop's own agreement) and one thread runs them first in, first out. No other
thread touches that group.

:class:`HostCopy` is what the training thread waits for in a background save: the state copied
into host buffers, which it may change again as soon as the copy returns. The buffers are reused
from one save to the next (a save starts only after the previous one finished with them), so a
steady run copies into pages already mapped, as DCP's async save copies into pinned memory.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from spotgpu.checkpoint.async_save import SaveHandle
from spotgpu.checkpoint.results import GenerationInfo
from spotgpu.checkpoint.snapshot import normalize, rebuild


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


class HostCopy:
    """The state of a background save, copied into host buffers the next save reuses (same key and size)."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def copy(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``state`` (numpy arrays and bytes, as the store takes them) the caller may not touch."""
        out: dict[str, Any] = {}
        kept: dict[str, np.ndarray] = {}
        for item in normalize(state):
            if item.kind != "ndarray":
                out[item.key] = bytes(item.view)
                continue
            buffer = self._buffers.get(item.key)
            if buffer is None or buffer.nbytes != item.size:
                buffer = np.empty(item.size, dtype=np.uint8)
            np.copyto(buffer, np.frombuffer(item.view, dtype=np.uint8))
            kept[item.key] = buffer
            out[item.key] = rebuild(item.kind, buffer, item.dtype, item.shape)
        self._buffers = kept
        return out

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._buffers.values())
