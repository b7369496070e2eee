"""Issue 32 items 1-2: a save costs ``7 N + 2`` requests whatever the number of tensors.

The defect: one generation cost about 5 requests per tensor per rank plus 18 per rank (each
tensor its own multipart object, HEADed by its rank and again by rank 0), so 1,024 ranks
with ~900 tensors each needed ~4.7 million requests. The formula is the one in
``ShardWriter``'s docstring and docs/checkpoints.md ("Requests per save"); a counting store
below the retry rules checks it request by request, and on moto the fault proxy checks it
on the wire (multipart parts and obstore's own retries included).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pytest

from spotgpu.checkpoint import CheckpointManager, layout, writer
from spotgpu.checkpoint.collective import ThreadAgreement
from spotgpu.checkpoint.snapshot import normalize
from spotgpu.storage.fault_proxy import FaultProxy
from spotgpu.storage.faults import CountingStore, StoreWrapper
from spotgpu.storage.resilient import ResilientStore
from spotgpu.storage.store import open_store

T = TypeVar("T")


def tensors(rank: int, count: int) -> dict[str, np.ndarray]:
    return {f"layer{i:04d}.w": np.full(64, rank * 10_000 + i, dtype=np.float32) for i in range(count)}


def save_all(url: str, store: Any, ranks: int, count: int, *, agreement: bool) -> list[Any]:
    """Every rank saves step 1 in its own thread; returns what each save returned (or raised)."""
    shared = ThreadAgreement(ranks, timeout=120) if agreement else None
    managers = [
        CheckpointManager(
            url, store=store, rank=r, world_size=ranks, session="count",
            agreement=shared.for_rank(r) if shared else None,
        )
        for r in range(ranks)
    ]  # fmt: skip
    out: list[Any] = [None] * ranks

    def run(rank: int) -> None:
        try:
            out[rank] = managers[rank].save(1, tensors(rank, count))
        except BaseException as err:
            out[rank] = err

    threads = [threading.Thread(target=run, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def formula(ranks: int) -> Counter[tuple[str, str]]:
    """Requests of one save, by (operation, object) (``ShardWriter``'s docstring)."""
    return Counter(
        {
            ("get", "commit"): ranks + 1,  # every rank checks the step is free; the coordinator reads its marker back
            ("put", "lease"): ranks,
            ("put", "shard"): ranks,
            ("head", "shard"): 2 * ranks,  # the rank, then the coordinator
            ("put", "part"): ranks,
            ("get", "part"): ranks,  # the coordinator
            ("put_if_absent", "commit"): 1,
        }
    )


@pytest.fixture(autouse=True)
def no_retention(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retention after a commit (listing and deleting old generations) is counted apart."""
    monkeypatch.setattr(CheckpointManager, "_prune", lambda self: None)


@pytest.mark.parametrize(("ranks", "count"), [(1, 1000), (8, 50)])
def test_a_save_is_7n_plus_2_requests_whatever_the_number_of_tensors(tmp_path: Any, ranks: int, count: int) -> None:
    counting = CountingStore(open_store(tmp_path.as_uri()).inner)
    results = save_all(tmp_path.as_uri(), ResilientStore(counting), ranks, count, agreement=True)
    assert all(not isinstance(r, BaseException) and r.committed for r in results), results
    assert counting.counts == formula(ranks)
    assert counting.total() == 7 * ranks + 2
    restored = CheckpointManager(tmp_path.as_uri(), rank=ranks - 1, world_size=ranks, session="x").restore()
    assert restored is not None and all(np.array_equal(restored.state[k], v) for k, v in tensors(ranks - 1, count).items())


def test_without_an_agreement_only_the_polls_are_added(tmp_path: Any) -> None:
    ranks = 8
    counting = CountingStore(open_store(tmp_path.as_uri()).inner)
    results = save_all(tmp_path.as_uri(), ResilientStore(counting), ranks, 50, agreement=False)
    assert all(not isinstance(r, BaseException) for r in results), results
    polls = Counter(counting.counts)
    polls.subtract(formula(ranks))
    extra = {k: n for k, n in polls.items() if n}
    # What is left: each waiting rank read the marker at least once, a verdict only while the
    # marker was missing, and the coordinator a part only while it was late.
    assert set(extra) <= {("get", "commit"), ("get", "verdict"), ("get", "part")}, extra
    assert extra.get(("get", "commit"), 0) >= ranks - 1
    assert all(n >= 0 for n in extra.values())


def test_on_the_wire_the_formula_holds_on_moto(s3_server: dict[str, Any]) -> None:
    """The same count where it matters, HTTP requests at the store, obstore's own included."""
    with FaultProxy(s3_server["endpoint"]) as proxy:
        url = f"s3://ckpt/wire-{time.monotonic_ns()}"
        store = open_store(url, **{**s3_server, "endpoint": proxy.url})
        proxy.clear()
        results = save_all(url, store, 8, 50, agreement=True)
        assert all(not isinstance(r, BaseException) for r in results), results
        assert proxy.total() == 7 * 8 + 2, proxy.counts
        assert proxy.total("ok") == proxy.total()


class InFlight(StoreWrapper):
    """Counts requests in flight at once, each taking ``seconds``."""

    def __init__(self, inner: Any, seconds: float) -> None:
        super().__init__(inner)
        self.seconds, self.now, self.peak = seconds, 0, 0
        self._lock = threading.Lock()

    def _around(self, op: str, path: str, call: Callable[[], T]) -> T:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.seconds)
            return call()
        finally:
            with self._lock:
                self.now -= 1


def test_the_coordinator_reads_parts_and_checks_shards_64_at_a_time(tmp_path: Any) -> None:
    ranks = 200
    store = open_store(tmp_path.as_uri())
    generation = layout.generation_name(1, "wide")
    for rank in range(ranks):
        writer.write_part(store, generation, 1, rank, ranks, normalize({"x": b"%d" % rank}), "xxh3_128")
    counting = CountingStore(store.inner)
    in_flight = InFlight(counting, 0.01)
    record = writer.commit(ResilientStore(in_flight), generation, 1, ranks, "xxh3_128", timeout=60)
    assert len(record.parts) == ranks
    assert in_flight.peak == writer.GATHER_WORKERS  # bounded, and used to the full
    assert counting.total(op="get", kind="part") == ranks and counting.total(op="head", kind="shard") == ranks
    assert counting.total() == 2 * ranks + 2  # + the marker and its read-back: never once per value
