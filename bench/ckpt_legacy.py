"""The previous release's checkpoint write path (format 1), request for request, for the
side-by-side rows of ``bench/ckpt_scale.py``. Not used by the library.

What it sends per rank (the code before issue 32, ``git show 1ddab64:spotgpu/checkpoint/writer.py``):
one GET of the step's marker; a lease PUT (refreshed every 5 s, DELETEd at the end); per
tensor an object of its own, always uploaded as a multipart stream (create, part, complete)
and HEADed; the part PUT and read back (GET); then rank 0 GETs every part in rank order
(polling 50 ms while missing), HEADs every object of every part (8 threads), writes the
marker create-only and reads it back, while every other rank polls the marker every 50 ms.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.errors import ObjectMissingError
from spotgpu.checkpoint.hashing import digest
from spotgpu.storage.object_store import PART_SIZE, ObjectStore

POLL = 0.05
HEAD_THREADS = 8


def _put_stream(store: Any, path: str, data: bytes) -> None:
    """How the old ObjectStore sent a streamed object: always multipart."""
    backend = store if isinstance(store, ObjectStore) else getattr(store, "inner", store)
    if isinstance(backend, ObjectStore):
        import obstore

        obstore.put(backend.inner, backend._key(path), iter([data]), chunk_size=PART_SIZE)
    else:
        store.put(path, data)


def _wait(store: Any, path: str, deadline: float) -> bytes:
    while True:
        try:
            return bytes(store.get(path))
        except ObjectMissingError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{path} still missing") from None
            time.sleep(POLL)


class _Lease:
    def __init__(self, store: Any, generation: str, rank: int) -> None:
        self.store, self.path = store, f"{layout.GENERATIONS}/{generation}/_writing-r{rank:05d}.json"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(layout.LEASE_REFRESH_SECONDS):
            try:
                self.store.put(self.path, json.dumps({"t": time.time()}).encode())
            except Exception:  # as the old lease did: a refresh error only matters at the commit's check
                continue

    def __enter__(self) -> _Lease:
        self.store.put(self.path, json.dumps({"t": time.time()}).encode())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.store.delete(self.path)


def legacy_save(
    store: Any, rank: int, world: int, session: str, step: int, state: Mapping[str, np.ndarray], timeout: float = 600
) -> float:
    """One rank's save the old way; returns the coordinator's commit seconds (0 elsewhere)."""
    generation = layout.generation_name(step, session)
    marker = layout.commit_path(step)
    try:
        store.get(marker)
        raise RuntimeError(f"step {step} already committed")
    except ObjectMissingError:
        pass
    commit_seconds = 0.0
    with _Lease(store, generation, rank):
        objects = []
        for index, (key, value) in enumerate(state.items()):
            path = layout.legacy_object_path(generation, rank, index, key)
            data = value.tobytes()
            _put_stream(store, path, data)
            if store.head(path).size != len(data):
                raise RuntimeError(f"{path}: size")
            objects.append({"key": key, "path": path, "size": len(data), "hash": digest("xxh3_128", data)})
        part_path = f"{layout.GENERATIONS}/{generation}/part-r{rank:05d}.json"
        body = json.dumps({"rank": rank, "objects": objects}).encode()
        store.put(part_path, body)
        if bytes(store.get(part_path)) != body:
            raise RuntimeError("part read back differs")
        deadline = time.monotonic() + timeout
        if rank != 0:
            _wait(store, marker, deadline)
            return 0.0
        started = time.monotonic()
        entries: list[dict[str, Any]] = []
        for r in range(world):
            part = json.loads(_wait(store, f"{layout.GENERATIONS}/{generation}/part-r{r:05d}.json", deadline))
            entries.extend(part["objects"])
        check_all(store, entries)
        record = json.dumps({"generation": generation, "step": step, "parts": world}).encode()
        store.put_if_absent(marker, record)
        store.get(marker)
        commit_seconds = time.monotonic() - started
    return commit_seconds


def check_all(store: Any, entries: Sequence[dict[str, Any]]) -> None:
    """The old coordinator's check: HEAD every object of every part, 8 at a time."""

    def check(entry: dict[str, Any]) -> None:
        if store.head(entry["path"]).size != entry["size"]:
            raise RuntimeError(f"{entry['path']}: size")

    with ThreadPoolExecutor(HEAD_THREADS) as pool:
        list(pool.map(check, entries))
