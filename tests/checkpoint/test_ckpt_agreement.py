"""Issue 32 item 4 with a process group: a failed generation reaches every rank through the
group at once, and with an agreement no rank polls the store for the marker or a verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def _worker(rank: int, world: int, root: str) -> None:
    import time

    import numpy as np
    from ckpt_gloo import write_result

    from spotgpu.checkpoint import CheckpointManager
    from spotgpu.checkpoint.collective import ProcessGroupAgreement
    from spotgpu.storage.faults import CountingStore, FaultyStore
    from spotgpu.storage.resilient import ResilientStore, RetryPolicy
    from spotgpu.storage.store import open_store

    CheckpointManager._prune = lambda self: None  # type: ignore[method-assign]  # retention reads markers too: counted apart
    url = Path(root, "store").as_uri()
    counting = CountingStore(open_store(url).inner)
    faulty = FaultyStore(counting)
    store = ResilientStore(faulty, RetryPolicy(first_backoff=0.01, max_backoff=0.1, max_seconds=2.0))
    mgr = CheckpointManager(
        url, store=store, rank=rank, world_size=world, session="pg", commit_timeout_seconds=600,
        agreement=ProcessGroupAgreement(),
    )  # fmt: skip
    out: dict[str, Any] = {}
    ok = mgr.save(1, {"w": np.full(8, rank, dtype=np.float32)})
    out["ok"] = [ok.generation, ok.committed]
    polls = counting.total(op="get", kind="commit") + counting.total(op="get", kind="verdict")
    out["polls_after_ok"] = polls
    if rank == 0:  # the coordinator cannot write step 2's marker at all
        faulty.add("reset", "put_if_absent", r"^commits/000000000002", times=10_000)
    started = time.monotonic()
    try:
        mgr.save(2, {"w": np.full(8, rank, dtype=np.float32)})
        out["failed"] = None
    except Exception as err:
        out["failed"] = f"{type(err).__name__}: {err}"
    out["seconds"] = time.monotonic() - started
    out["polls"] = counting.total(op="get", kind="commit") + counting.total(op="get", kind="verdict") - polls
    write_result(root, "agreement", rank, out)


@pytest.mark.timeout(120)
def test_a_failed_generation_reaches_every_rank_through_the_group_without_polling(tmp_path: Path) -> None:
    from ckpt_gloo import read_results, run_ranks

    run_ranks(_worker, 3, tmp_path, timeout=90)
    r0, r1, r2 = read_results(tmp_path, "agreement", 3)
    assert r0["ok"] == r1["ok"] == r2["ok"] and r0["ok"][1] is True
    assert "StoreUnavailableError" in r0["failed"] and "commits/000000000002.json" in r0["failed"]
    for other in (r1, r2):
        assert other["failed"].startswith("GenerationFailedError") and "gave up" in other["failed"], other
        assert other["seconds"] < 20, other  # the coordinator's ~2 s, not the 600 s commit timeout
    # Each rank read the step's marker once before saving (is it free?); nothing else was polled:
    # on the committed save the others got the marker through the group.
    assert [r["polls_after_ok"] for r in (r0, r1, r2)] == [2, 1, 1]
    assert [r["polls"] for r in (r0, r1, r2)] == [1, 1, 1]
