"""Turning a state mapping into flat byte views, and copying it to host memory on a budget.

A synchronous save writes straight from the caller's buffers (no copy). An async save
must copy first, because training resumes and mutates the state while the write runs;
:func:`snapshot_chunks` does that copy chunk by chunk against a :class:`HostBudget`, so
a state larger than the budget streams through it (the caller blocks while the
writer drains) instead of doubling host memory. Freed chunk buffers go back to a
:class:`ChunkPool`, so steady-state snapshots copy into already-mapped pages.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Copy/write granularity: big enough for full-speed I/O, small enough to pipeline.
DEFAULT_CHUNK = 64 << 20


@dataclass(frozen=True)
class Item:
    """One state value as a flat C-contiguous byte view plus what rebuilds it."""

    key: str
    kind: str
    view: memoryview
    dtype: str | None = None
    shape: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        return self.view.nbytes


def normalize(state: Mapping[str, Any]) -> list[Item]:
    """Validate a state mapping and view every value as bytes (copies only non-contiguous arrays)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"state: got {type(state).__name__}; fix: pass a mapping of str to bytes/ndarray")
    items: list[Item] = []
    for key, value in state.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"state key {key!r} must be a non-empty str")
        if isinstance(value, np.ndarray):
            arr = contiguous_array(value, f"state[{key!r}]")
            flat = arr.reshape(-1).view(np.uint8)
            items.append(Item(key, "ndarray", flat.data, arr.dtype.str, tuple(arr.shape)))
        elif isinstance(value, bytes | bytearray | memoryview):
            try:
                view = memoryview(value).cast("B")
            except TypeError:
                view = memoryview(bytes(value))  # non-contiguous memoryview
            items.append(Item(key, "bytes", view))
        else:
            raise TypeError(
                f"state[{key!r}]: {type(value).__name__} is not bytes, memoryview or numpy.ndarray; "
                "fix: convert it (torch: spotgpu.checkpoint.torch.torch_state)"
            )
    return items


def contiguous_array(value: np.ndarray, where: str) -> np.ndarray:
    """``value`` as a C-contiguous array of the *same* shape and dtype (byte order included).

    ``np.ascontiguousarray`` is not that: it returns at least 1-d, so a 0-d array would be
    saved (and restored) as shape ``(1,)``. A copy is made only for non-contiguous input."""
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(f"{where}: a masked array would lose its mask; fix: save .data and .mask as two arrays")
    if value.dtype.hasobject or value.dtype.fields is not None:
        raise TypeError(f"{where}: dtype {value.dtype} is not a plain numeric dtype; fix: use bytes")
    if value.flags.c_contiguous:
        return value
    return np.ascontiguousarray(value).reshape(value.shape)


def rebuild(kind: str, data: bytearray | memoryview | np.ndarray, dtype: str | None,
            shape: tuple[int, ...] | None) -> Any:  # fmt: skip
    """The inverse of :func:`normalize` for one value (zero-copy over ``data``)."""
    if kind == "ndarray":
        return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(() if shape is None else shape)
    return bytes(data)


def check_budget(limit: int | None) -> int | None:
    """``limit`` if it is a valid ``memory_budget_bytes`` (a positive int, or None for no bound)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise ValueError(f"memory_budget_bytes: {limit!r} must be positive or None; fix: e.g. 2 << 30 (2 GiB)")
    return limit


class HostBudget:
    """A byte-counting semaphore: at most ``limit`` snapshot bytes in host memory at once.

    ``peak``: the most bytes held at once since it was made (what a benchmark or a test reads; with no
    ``limit`` it is the whole state's copy)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = check_budget(limit)
        self.used = 0
        self.peak = 0
        self._cond = threading.Condition()

    def acquire(
        self, n: int, abort: Callable[[], bool] = lambda: False, on_block: Callable[[], None] = lambda: None
    ) -> bool:
        """Block until ``n`` bytes fit (a lone chunk always fits); False if ``abort()`` turned true.
        ``on_block`` runs before each wait (the async pipe uses it to start the writer)."""
        with self._cond:
            while self.limit is not None and self.used and self.used + n > self.limit:
                if abort():
                    return False
                on_block()
                self._cond.wait(0.1)
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()


class ChunkPool:
    """Reusable snapshot buffers (first-touch page faults dominate a cold copy).

    A buffer is exactly the size of the chunk it holds and is reused only for a chunk of that size
    (a steady run's state has the same values each save), so what a :class:`HostBudget` is charged
    is what is allocated. The free buffers stay within ``max_bytes``, and a chunk with no free
    buffer of its size drops the free ones before a new one is allocated (the state changed shape):
    the free and the busy buffers together never hold more than the budget the busy ones were
    charged."""

    def __init__(self, chunk: int, max_bytes: int | None) -> None:
        self.chunk = chunk
        self.max_bytes = max_bytes
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def pooled(self, n: int) -> bool:
        return n * 4 >= self.chunk  # smaller values are not worth pooling

    def take(self, n: int) -> np.ndarray:
        if self.pooled(n):
            with self._lock:
                for i in range(len(self._free) - 1, -1, -1):  # the newest first: its pages are the warmest
                    if self._free[i].nbytes == n:
                        return self._free.pop(i)
                self._free.clear()
        return np.empty(n, dtype=np.uint8)

    def give(self, buf: np.ndarray) -> None:
        if not self.pooled(buf.nbytes) or buf.base is not None:
            return
        with self._lock:
            if self.max_bytes is None or sum(b.nbytes for b in self._free) + buf.nbytes <= self.max_bytes:
                self._free.append(buf)


def chunk_views(view: memoryview, chunk: int = DEFAULT_CHUNK) -> Iterator[memoryview]:
    """Slices of ``view``; one empty slice for an empty value so every item yields once."""
    if view.nbytes == 0:
        yield view
        return
    for start in range(0, view.nbytes, chunk):
        yield view[start : start + chunk]
