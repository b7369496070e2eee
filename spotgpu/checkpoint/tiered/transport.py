"""Moving copies between nodes over the job's own process group.

Why the job's process group and not another transport: every node of a gang already has one
(torchrun formed it; its members are exactly the nodes that hold and need copies), it is
authenticated by the rendezvous, needs no port or server of its own on a spot VM, and gloo
sends CPU tensors over TCP between any two ranks. The tier makes its own gloo group (a job on
NCCL cannot send host memory over its default group), created once by every rank.

:meth:`GroupLink.exchange` sends files: for each destination a header (every file's path and
size), then the bytes in chunks of :data:`CHUNK_BYTES`, all pairs at once (non-blocking
send/recv), two rounds in flight: while round k is on the wire, round k-1's chunks are
written and checked and round k+1's are read from disk. Host memory stays at two chunks per
pair whatever the shard's size. What arrives is not trusted: each source's
:class:`Observer` (:class:`~spotgpu.checkpoint.tiered.arrival.ArrivalCheck`) checks every
chunk as it lands, and once it has found a problem the rest of that copy is received (the
sender's collective must complete) but not written.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

#: Bytes per send: big enough for full TCP throughput, small enough to bound host memory per pair
#: (one send and one receive buffer per partner, reused for every chunk).
CHUNK_BYTES = 64 << 20
_HEADER_TAG, _DATA_TAG = 7301, 7310  # data rounds alternate _DATA_TAG and _DATA_TAG + 1


class Observer(Protocol):
    """Sees one source's files as they arrive, in order: ``begin``, ``update`` per chunk, ``end``."""

    @property
    def failed(self) -> bool: ...

    def begin(self, path: str, size: int) -> None: ...

    def update(self, data: memoryview) -> None: ...

    def end(self) -> None: ...


class Link(Protocol):
    """The tier's view of the gang: its rank and size, a gather of small objects, file exchange."""

    rank: int
    world_size: int

    def all_gather(self, value: Any) -> list[Any]: ...

    def exchange(
        self,
        sends: Mapping[int, tuple[Path, Sequence[Path]]],
        receives: Mapping[int, Path],
        observers: Mapping[int, Observer] | None = None,
    ) -> dict[int, list[Path]]: ...


class SoloLink:
    """A job of one process: nothing to exchange."""

    rank = 0
    world_size = 1

    def all_gather(self, value: Any) -> list[Any]:
        return [value]

    def exchange(
        self,
        sends: Mapping[int, tuple[Path, Sequence[Path]]],
        receives: Mapping[int, Path],
        observers: Mapping[int, Observer] | None = None,
    ) -> dict[int, list[Path]]:
        if sends or receives:
            raise ValueError("a single-process job has no peers to exchange copies with")
        return {}


class GroupLink:
    """The tier's gloo process group over every rank of the job."""

    def __init__(self, group: Any = None) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.group = group if group is not None else dist.new_group(backend="gloo")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    def all_gather(self, value: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        self.dist.all_gather_object(out, value, group=self.group)
        return out

    def exchange(
        self,
        sends: Mapping[int, tuple[Path, Sequence[Path]]],
        receives: Mapping[int, Path],
        observers: Mapping[int, Observer] | None = None,
    ) -> dict[int, list[Path]]:
        """Send ``files`` (relative to ``root``) to each destination; receive each source's into its directory,
        each chunk shown to the source's observer as it lands.

        Returns, per source, the relative paths received (their parents created under the directory).
        """
        import torch

        dist = self.dist
        headers = {dst: json.dumps([[p.as_posix(), (root / p).stat().st_size] for p in files]).encode()
                   for dst, (root, files) in sends.items()}  # fmt: skip
        # 1. header lengths, then headers
        lengths = {src: torch.zeros(1, dtype=torch.int64) for src in receives}
        self._wait([dist.isend(torch.tensor([len(h)], dtype=torch.int64), dst, group=self.group, tag=_HEADER_TAG)
                    for dst, h in headers.items()]
                   + [dist.irecv(t, src, group=self.group, tag=_HEADER_TAG) for src, t in lengths.items()])  # fmt: skip
        raw = {src: torch.empty(int(t.item()), dtype=torch.uint8) for src, t in lengths.items()}
        self._wait([dist.isend(torch.frombuffer(bytearray(h), dtype=torch.uint8), dst, group=self.group,
                               tag=_HEADER_TAG) for dst, h in headers.items() if h]
                   + [dist.irecv(t, src, group=self.group, tag=_HEADER_TAG) for src, t in raw.items() if t.numel()])  # fmt: skip
        incoming = {src: [(Path(p), int(n)) for p, n in json.loads(bytes(t.numpy()).decode())] for src, t in raw.items()}
        # 2. the bytes, chunk by chunk, every pair at once, two rounds in flight (buffers alternate by round)
        readers = {dst: _Reader(root, files) for dst, (root, files) in sends.items()}
        writers = {src: _Writer(receives[src], entries, (observers or {}).get(src)) for src, entries in incoming.items()}
        inboxes = {src: [torch.empty(min(CHUNK_BYTES, w.remaining), dtype=torch.uint8) for _ in range(2)]
                   for src, w in writers.items()}  # fmt: skip
        pending: tuple[list[Any], list[tuple[_Writer, Any]]] = ([], [])
        try:
            for round_ in itertools.count():
                ops, landing = [], []
                for dst, reader in readers.items():
                    chunk = reader.next_chunk(round_ % 2)
                    if chunk is not None:
                        ops.append(dist.isend(torch.from_numpy(chunk), dst, group=self.group, tag=_DATA_TAG + round_ % 2))
                for src, writer in writers.items():
                    size = writer.claim()
                    if size:
                        buffer = inboxes[src][round_ % 2][:size]
                        ops.append(dist.irecv(buffer, src, group=self.group, tag=_DATA_TAG + round_ % 2))
                        landing.append((writer, buffer))
                self._wait(pending[0])  # round k-1 is complete: write and check it while round k is on the wire
                for writer, buffer in pending[1]:
                    writer.write(buffer.numpy())
                if not ops:
                    break
                pending = (ops, landing)
        finally:
            for writer in writers.values():
                writer.close()
        return {src: [p for p, _ in entries] for src, entries in incoming.items()}

    @staticmethod
    def _wait(works: list[Any]) -> None:
        for work in works:
            work.wait()


class _Reader:
    """The concatenated bytes of ``files`` in chunks, read into one reused buffer (no copy per chunk)."""

    def __init__(self, root: Path, files: Sequence[Path]) -> None:
        self.paths = [root / f for f in files]
        self.index = 0
        self.handle: Any = None
        total = sum(p.stat().st_size for p in self.paths)
        size = max(1, min(CHUNK_BYTES, total))
        #: two buffers: one is read into while the other's send is still in flight
        self.buffers = [np.empty(size, dtype=np.uint8), np.empty(size if total > size else 1, dtype=np.uint8)]

    def next_chunk(self, which: int = 0) -> np.ndarray | None:
        """The next bytes, in buffer ``which`` (the caller alternates; a buffer is reused once its send completed)."""
        buffer = self.buffers[which]
        filled = 0
        view = memoryview(buffer.data)
        while filled < len(buffer) and self.index < len(self.paths):
            if self.handle is None:
                self.handle = open(self.paths[self.index], "rb", buffering=0)  # noqa: SIM115 - closed below
            n = self.handle.readinto(view[filled:])
            if n:
                filled += n
                continue
            self.handle.close()
            self.handle, self.index = None, self.index + 1
        return buffer[:filled] if filled else None


class _Writer:
    """Writes a source's stream into its files, in the header's order and sizes; fsyncs each. Each piece is
    shown to the source's observer first; once the observer has found a problem nothing more is written."""

    def __init__(self, into: Path, entries: Sequence[tuple[Path, int]], observer: Observer | None = None) -> None:
        self.into = into
        self.entries = list(entries)
        self.observer = observer
        self.index = 0
        self.left = self.entries[0][1] if self.entries else 0
        self.remaining = sum(n for _, n in self.entries)
        #: bytes of the stream asked for (receives posted) but not yet written
        self.unclaimed = self.remaining
        self.handle: Any = None
        self._skip_empty()

    def claim(self) -> int:
        """The size of the next chunk to receive (0: everything is asked for)."""
        size = min(CHUNK_BYTES, self.unclaimed)
        self.unclaimed -= size
        return size

    def write(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        self.remaining -= len(view)
        while len(view):
            if self.handle is None:
                rel, size = self.entries[self.index]
                if self.observer is not None:
                    self.observer.begin(rel.as_posix(), size)
                path = self.into / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                self.handle = open(path, "wb")  # noqa: SIM115 - closed in _next
            take = min(self.left, len(view))
            if self.observer is not None:
                self.observer.update(view[:take])
            if self.observer is None or not self.observer.failed:
                self.handle.write(view[:take])
            view, self.left = view[take:], self.left - take
            if self.left == 0:
                self._next()

    def _next(self) -> None:
        if self.observer is not None:
            self.observer.end()
        if self.observer is None or not self.observer.failed:
            self.handle.flush()
            os.fsync(self.handle.fileno())
        self.handle.close()
        self.handle = None
        self.index += 1
        self.left = self.entries[self.index][1] if self.index < len(self.entries) else 0
        self._skip_empty()

    def _skip_empty(self) -> None:
        while self.index < len(self.entries) and self.left == 0:
            rel = self.entries[self.index][0]
            if self.observer is not None:
                self.observer.begin(rel.as_posix(), 0)
                self.observer.end()
            path = self.into / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            self.index += 1
            self.left = self.entries[self.index][1] if self.index < len(self.entries) else 0

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None
