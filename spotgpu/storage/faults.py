"""Store wrappers for tests, benchmarks and drills: count requests, add latency, inject faults.

They sit *below* :class:`~spotgpu.storage.resilient.ResilientStore` (wrap the backend, then
hand the wrapper to ``ResilientStore``), so what they count is what would go on the wire and
what they break is what the retry rules must resolve:

- :class:`CountingStore`: requests per operation and per kind of object (the request formula
  in docs/checkpoints.md is asserted with it);
- :class:`LatencyStore`: a fixed delay per request (a store 10 ms away);
- :class:`FaultyStore`: scripted faults by operation and path, the failures a real store and
  network have: ``reset`` (the request never arrived), ``lost_reply`` (it was applied, the
  answer was lost), ``truncate`` (a read's body, or a listing, is cut in half) and
  ``slowdown`` (a 503 burst).

The HTTP-level counterpart for cloud emulators is :mod:`spotgpu.storage.fault_proxy`.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from spotgpu.storage.errors import TransientStoreError
from spotgpu.storage.objects import ObjectInfo, Version
from spotgpu.storage.payload import Payload

T = TypeVar("T")
Op = str  # put | put_if_absent | put_if | put_versioned | get | get_versioned | get_into | get_range | head | list | delete
FaultKind = Literal["reset", "lost_reply", "truncate", "slowdown"]


class StoreWrapper:
    """Delegates every Store operation to ``inner`` through :meth:`_around` (override it)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.url: str = inner.url

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _around(self, op: Op, path: str, call: Callable[[], T]) -> T:
        return call()

    def put(self, path: str, data: Payload) -> None:
        self._around("put", path, lambda: self.inner.put(path, data))

    def put_if_absent(self, path: str, data: bytes) -> None:
        self._around("put_if_absent", path, lambda: self.inner.put_if_absent(path, data))

    def put_if(self, path: str, data: bytes, expected: Version | None) -> Version:
        return self._around("put_if", path, lambda: self.inner.put_if(path, data, expected))

    def put_versioned(self, path: str, data: bytes) -> Version:
        return self._around("put_versioned", path, lambda: self.inner.put_versioned(path, data))

    def get(self, path: str) -> bytearray:
        return self._around("get", path, lambda: self.inner.get(path))

    def get_versioned(self, path: str) -> tuple[bytes, Version]:
        return self._around("get_versioned", path, lambda: self.inner.get_versioned(path))

    def get_into(self, path: str, out: memoryview) -> None:
        self.get_into_streamed(path, out, lambda _chunk: None)

    def get_into_streamed(self, path: str, out: memoryview, on_chunk: Callable[[memoryview], object]) -> None:
        self._around("get_into", path, lambda: self.inner.get_into_streamed(path, out, on_chunk))

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self._around("get_range", path, lambda: self.inner.get_range(path, start, end))

    def get_range_into(
        self,
        path: str,
        start: int,
        targets: Sequence[memoryview],
        on_piece: Callable[[int, memoryview], object] | None = None,
    ) -> None:
        self._around("get_range", path, lambda: self.inner.get_range_into(path, start, targets, on_piece))

    def head(self, path: str) -> ObjectInfo:
        return self._around("head", path, lambda: self.inner.head(path))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return iter(self._around("list", prefix, lambda: list(self.inner.list(prefix))))

    def delete(self, path: str) -> None:
        self._around("delete", path, lambda: self.inner.delete(path))

    def delete_many(self, paths: Sequence[str]) -> None:
        """One bulk request per 1,000 paths on S3 (counted as one call here)."""
        paths = list(paths)
        if paths:
            self._around("delete_many", paths[0], lambda: self.inner.delete_many(paths))


def kind_of(path: str) -> str:
    """What a checkpoint path is, for counting: commit, verdict, lease, part, shard, object, other."""
    name = path.rsplit("/", 1)[-1]
    if path.startswith("commits/"):
        return "commit"
    if path.startswith("failed/"):
        return "verdict"
    if name.startswith("_writing-"):
        return "lease"
    if name.endswith(".shard"):
        return "shard"
    if name.startswith("part-") or (name.startswith("r") and name.endswith(".json")):
        return "part"
    if path.startswith(("generations/", "shards/")):
        return "object"
    return "other"


class CountingStore(StoreWrapper):
    """Counts requests: ``counts[(op, kind_of(path))]``, thread-safe."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def _around(self, op: Op, path: str, call: Callable[[], T]) -> T:
        with self._lock:
            self.counts[(op, kind_of(path))] += 1
        return call()

    def total(self, *, op: str | None = None, kind: str | None = None) -> int:
        with self._lock:
            return sum(n for (o, k), n in self.counts.items() if (op is None or o == op) and (kind is None or k == kind))

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()


class LatencyStore(StoreWrapper):
    """Every request takes ``seconds`` longer (a store that far away)."""

    def __init__(self, inner: Any, seconds: float) -> None:
        super().__init__(inner)
        self.seconds = seconds

    def _around(self, op: Op, path: str, call: Callable[[], T]) -> T:
        time.sleep(self.seconds)
        return call()


@dataclass
class Fault:
    """The next ``times`` calls of ``op`` on a path matching ``path`` (a regex) get ``kind``."""

    kind: FaultKind
    op: Op
    path: str
    times: int = 1
    hits: int = 0


class FaultyStore(StoreWrapper):
    """Scripted faults at the storage layer (see the module docstring)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, kind: FaultKind, op: Op, path: str = "", times: int = 1) -> Fault:
        fault = Fault(kind, op, path, times)
        with self._lock:
            self.faults.append(fault)
        return fault

    def _take(self, op: Op, path: str, kind: FaultKind | None = None) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                live = fault.hits < fault.times and fault.op == op and (kind is None or fault.kind == kind)
                if live and re.search(fault.path, path):
                    fault.hits += 1
                    return fault
        return None

    def _around(self, op: Op, path: str, call: Callable[[], T]) -> T:
        fault = self._take(op, path)
        if fault is None:
            return call()
        where = f"{self.url}/{path}"
        if fault.kind == "reset":
            raise TransientStoreError(f"{op} {where}: connection reset before the request was sent (injected)")
        if fault.kind == "slowdown":
            raise TransientStoreError(f"{op} {where}: 503 SlowDown (injected)", status=503)
        call()  # applied: what follows is only the answer going wrong
        if fault.kind == "lost_reply":
            raise TransientStoreError(f"{op} {where}: the reply was lost after the store applied it (injected)")
        raise TransientStoreError(f"{op} {where}: response body cut short (injected)")

    # Reads cut mid-body deliver the first half to the caller first, as a real cut does.
    def get_into_streamed(self, path: str, out: memoryview, on_chunk: Callable[[memoryview], object]) -> None:
        if self._peek("truncate", "get_into", path):
            self._take("get_into", path, "truncate")
            half = out.nbytes // 2
            self.inner.get_range_into(path, 0, [out[:half]], lambda _i, piece: on_chunk(piece))
            raise TransientStoreError(f"get {self.url}/{path}: response body cut short (injected)")
        super().get_into_streamed(path, out, on_chunk)

    def get_range_into(
        self,
        path: str,
        start: int,
        targets: Sequence[memoryview],
        on_piece: Callable[[int, memoryview], object] | None = None,
    ) -> None:
        if self._peek("truncate", "get_range", path):
            self._take("get_range", path, "truncate")
            half = sum(t.nbytes for t in targets) // 2
            cut: list[memoryview] = []
            for t in targets:
                take = min(t.nbytes, half - sum(c.nbytes for c in cut))
                cut.append(t[:take])
            self.inner.get_range_into(path, start, cut, on_piece)
            raise TransientStoreError(f"get_range {self.url}/{path}: response body cut short (injected)")
        super().get_range_into(path, start, targets, on_piece)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        if self._peek("truncate", "list", prefix):
            self._take("list", prefix, "truncate")
            listed = list(self.inner.list(prefix))

            def cut() -> Iterator[ObjectInfo]:
                yield from listed[: len(listed) // 2]
                raise TransientStoreError(f"list {self.url}/{prefix}: response body cut short (injected)")

            return cut()
        return super().list(prefix)

    def _peek(self, kind: FaultKind, op: Op, path: str) -> bool:
        with self._lock:
            return any(
                f.kind == kind and f.hits < f.times and f.op == op and re.search(f.path, path) for f in self.faults
            )
