"""A DCP save in progress holds the same lease as the plain manager's (issue 22 item 1).

Without it, ``gc`` at grace 0 from another process deleted a DCP generation between its
objects and its commit marker, and the coordinator then committed a generation that fails
verify. Single process (DCP without a process group), so the pause is deterministic.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def test_gc_at_grace_zero_never_deletes_a_dcp_save_in_progress(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    from spotgpu.checkpoint import CheckpointManager, GracePeriod
    from spotgpu.checkpoint.dcp import GenerationWriter
    from spotgpu.storage.store import open_store

    url = tmp_path.as_uri()
    paused, go = threading.Event(), threading.Event()

    class PauseBeforeMarker:
        """The writer's store: the commit marker's create-only PUT waits for the test."""

        def __init__(self, inner: object) -> None:
            self.inner = inner
            self.url = inner.url  # type: ignore[attr-defined]

        def put_if_absent(self, path: str, data: bytes) -> None:
            paused.set()
            assert go.wait(60)
            self.inner.put_if_absent(path, data)  # type: ignore[attr-defined]

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    writer = GenerationWriter(url, step=3, store=PauseBeforeMarker(open_store(url)))  # type: ignore[arg-type]
    state = {"w": torch.arange(4096, dtype=torch.float32), "meta": {"step": 3}}
    errors: list[BaseException] = []

    def save() -> None:
        try:
            dcp.save(state, storage_writer=writer, no_dist=True)
        except BaseException as err:  # reported to the test thread
            errors.append(err)

    thread = threading.Thread(target=save, daemon=True)
    thread.start()
    try:
        assert paused.wait(60), "the DCP save never reached its commit marker"
        report = CheckpointManager(url, debris=GracePeriod(0)).gc()
        assert report.deleted_debris == [], report
    finally:
        go.set()
        thread.join(60)
    assert not errors, errors
    mgr = CheckpointManager(url)
    assert mgr.verify(3).ok, mgr.verify(3).problems
