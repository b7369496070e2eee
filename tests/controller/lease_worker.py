"""One contender in the two-process lease tests (and the bench soak).

Each process runs ``ticks`` ticks against the same object-store record: take or
renew the lease, fence on a take, read the record, pause, write ``counter + 1``
with its history entry, sometimes release. Some pauses are longer than the
lease (a paused holder that wakes after expiry); some writes are held back after
the local check passed (an in-flight request that lands late). Every outcome is
logged as one JSON line, so the test can check the record against what each
process believes it did.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from spotgpu.contract.state_store import ObjectJsonStore, Versioned
from spotgpu.controller.lease import FencedStore, Lease, LeaseLost

RECORD = "controller/record.json"


class LateWrites:
    """Delays some record writes *after* the lease check passed, as a slow network or a GC pause would."""

    def __init__(self, inner: ObjectJsonStore, rng: random.Random, chance: float, delay: float) -> None:
        self.inner, self.rng, self.chance, self.delay = inner, rng, chance, delay
        self.late = False

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)

    def put(self, key: str, doc: dict[str, Any]) -> None:
        self.inner.put(key, doc)

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)

    def read(self, key: str) -> Versioned | None:
        return self.inner.read(key)

    def write_if(self, key: str, doc: dict[str, Any], expected: Versioned | None) -> Versioned:
        self.late = key == RECORD and self.rng.random() < self.chance
        if self.late:
            time.sleep(self.delay)
        return self.inner.write_if(key, doc, expected)


def run_worker(
    name: str,
    url: str,
    options: dict[str, Any],
    out_path: str,
    *,
    ticks: int,
    ttl: float,
    skew: float,
    seed: int,
    start_at: float,
    long_pause_chance: float = 0.05,
    late_write_chance: float = 0.03,
    release_chance: float = 0.3,
) -> None:
    rng = random.Random(seed)
    store = LateWrites(ObjectJsonStore(url, **options), rng, late_write_chance, ttl + skew + 0.1)
    lease = Lease(store, ttl_seconds=ttl, max_clock_skew_seconds=skew)
    fenced = FencedStore(store, lease, (RECORD,))
    time.sleep(max(0.0, start_at - time.time()))
    with open(out_path, "w", encoding="utf-8") as out:

        def log(**entry: Any) -> None:
            out.write(json.dumps({"name": name, **entry}) + "\n")

        for tick in range(ticks):
            verdict = lease.acquire()
            if not verdict.held:
                log(tick=tick, outcome="refused", reason=verdict.reason)
                time.sleep(rng.uniform(0, 0.01))
                continue
            long_pause = rng.random() < long_pause_chance
            try:
                if verdict.reason != "renewed":
                    fenced.fence()
                doc = fenced.get(RECORD) or {"counter": 0, "history": []}
                time.sleep(ttl + skew + 0.1 if long_pause else rng.uniform(0, 0.01))
                n = int(doc["counter"]) + 1
                fenced.put(RECORD, {"counter": n, "history": [*doc["history"], [name, lease.token, n]]})
            except LeaseLost as err:
                log(tick=tick, outcome="write_refused", token=lease.token, long_pause=long_pause, reason=str(err))
            else:
                log(tick=tick, outcome="acted", token=lease.token, n=n, long_pause=long_pause, late=store.late)
            if rng.random() < release_chance:
                lease.release()
            time.sleep(rng.uniform(0, 0.01))
