"""Checkpoints at fleet scale (issue 32): requests, throttling and the coordinator, old layout vs new.

    .venv/bin/python bench/ckpt_scale.py                              # N = 8, 64, 256, 1024
    .venv/bin/python bench/ckpt_scale.py --ranks 8,64 --old-max-ranks 64 --commit-ranks 64
    .venv/bin/python bench/ckpt_scale.py --json out.json

N simulated ranks (threads with a few small tensors each: the request count of a save does
not depend on the bytes) save one generation to moto S3 on loopback, through a proxy
(``spotgpu.storage.fault_proxy``) that answers ``503 SlowDown`` beyond a token bucket per
*partition*, S3's per-prefix request rate: 3,500 writes/s and 5,500 reads/s scaled by
``--scale`` (default 1/20: moto behind the proxy serves ~350 requests/s on the 2-core box, so
at full rates nothing would ever be throttled; at 1/20 a hot prefix is, as on S3 under a
fleet). Every throttle-bound second here is about ``scale`` seconds on S3. A partition is the
key up to its 4th ``/`` (``run/case/shards/<hh>`` in the new layout, ``run/case/generations/
<gen>`` in the old): the model assumes S3 has already split the new layout's 256 hash
prefixes, which are the same for every generation, while the old layout's prefix is new at
every save and never is. The library's own poll budget is scaled by the same factor.

Rows per N, side by side in one run:

- ``old``: the previous release's request pattern (``bench/ckpt_legacy.py``), store polling;
- ``new``: ``CheckpointManager`` as shipped, waiting ranks polling the store, measured at
  its ``--generations``-th periodic save (the first ones teach each rank its wait) (up to
  ``--poll-max-ranks``: in the scaled world a 1,024-rank gang polls every ~40 s);
- ``new+group``: the same with a commit agreement (what ``Gang.commit_agreement()`` gives a
  gang with a process group): nothing is polled.

Columns: requests per generation as the proxy saw them (obstore's multipart parts and
retries included), per rank, 503s answered, the coordinator's commit seconds, the save's
wall time. Then the coordinator's commit alone at 10 ms per request (parts already written,
an in-memory store behind a fixed delay), and the request formulas extrapolated to the
published S3, GCS and Azure rates for ``--extrapolate-tensors`` (900: a 7B model with Adam
over 1,024 ranks). Nothing is asserted: ``tests/checkpoint/test_ckpt_scale.py`` runs a small
version and checks the counts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ckpt_legacy import check_all, legacy_save

from spotgpu.checkpoint import CheckpointManager, layout, writer
from spotgpu.checkpoint.collective import ThreadAgreement
from spotgpu.checkpoint.snapshot import normalize
from spotgpu.storage.fault_proxy import FaultProxy
from spotgpu.storage.faults import CountingStore, LatencyStore
from spotgpu.storage.object_store import ObjectStore
from spotgpu.storage.resilient import ResilientStore
from spotgpu.storage.store import open_store

#: Published request rates [DOCS, /work/shared/facts/storage.md].
S3_WRITES_PER_PREFIX, S3_READS_PER_PREFIX = 3500.0, 5500.0
GCS_WRITES, GCS_READS = 1000.0, 5000.0  # a bucket's starting rates
AZURE_REQUESTS = 20000.0  # per general-purpose v2 account
HASH_PREFIXES = 256
#: obstore's own defaults (what the previous release ran with).
OBSTORE_DEFAULT_RETRIES: dict[str, Any] = {"max_retries": 10, "retry_timeout": timedelta(minutes=3)}


@dataclass
class Row:
    ranks: int
    case: str
    requests: int
    per_rank: float
    throttled: int
    commit_seconds: float
    save_seconds: float
    failures: int
    #: Lease PUTs beyond the first per rank (a save longer than 5 s refreshes them).
    refreshes: int = 0
    #: Requests of the measured generation that reached its busiest key prefix (S3's partition):
    #: what the throttle meets first, counted, so it does not depend on how fast the box runs.
    hottest_prefix: int = 0


def state(rank: int, tensors: int, tensor_bytes: int) -> dict[str, np.ndarray]:
    return {f"layer{i:03d}.w": np.full(tensor_bytes // 4, rank + i, dtype=np.float32) for i in range(tensors)}


def run_threads(ranks: int, fn: Callable[[int], float]) -> tuple[float, float, int]:
    """``fn(rank)`` on every rank at once; (wall seconds, coordinator commit seconds, failures)."""
    out: list[Any] = [None] * ranks
    go = threading.Event()

    def run(rank: int) -> None:
        go.wait()
        try:
            out[rank] = fn(rank)
        except BaseException as err:  # reported as a failure count
            out[rank] = err

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(ranks)]
    for t in threads:
        t.start()
    started = time.monotonic()
    go.set()
    for t in threads:
        t.join(1800)
    wall = time.monotonic() - started
    failures = [o for o in out if isinstance(o, BaseException)]
    if failures:
        print(f"  {len(failures)} rank(s) failed, first: {failures[0]!r}", file=sys.stderr)
    commit = out[0] if isinstance(out[0], float) else float("nan")
    return wall, commit, len(failures)


def live_round(proxy: FaultProxy, options: dict[str, Any], run_id: str, ranks: int, case: str, args: Any) -> Row:
    url = f"s3://bench/{run_id}/{case}-{ranks}"
    counting: CountingStore | None = None
    if case == "old":  # as the previous release ran: the bare obstore adapter with obstore's default retries
        store = ObjectStore.from_url(url, **{**options, "endpoint": proxy.url, "retry_config": OBSTORE_DEFAULT_RETRIES})
    else:
        counting = CountingStore(open_store(url, **{**options, "endpoint": proxy.url}).inner)
        store = ResilientStore(counting)
    states = [state(r, args.tensors, args.tensor_bytes) for r in range(ranks)]
    agreement = ThreadAgreement(ranks, timeout=1800) if case == "new+group" else None
    managers = [
        CheckpointManager(
            url, store=store, rank=rank, world_size=ranks, session="bench", commit_timeout_seconds=1800,
            agreement=agreement.for_rank(rank) if agreement else None,
        )
        for rank in range(ranks)
    ]  # fmt: skip
    step = [1]  # the generation the next save writes
    if case == "old":

        def save(rank: int) -> float:
            return legacy_save(store, rank, ranks, "bench", step[0], states[rank], timeout=args.old_timeout)
    else:

        def save(rank: int) -> float:
            managers[rank].save(step[0], states[rank])
            timings = managers[rank].last_commit
            return timings.gather + timings.marker if timings is not None else 0.0

        # Periodic saves: the generations before the measured one let each rank learn how long
        # it waits for the marker (its first poll of the next comes after most of that wait).
        for generation in range(1, args.generations):
            step[0] = generation
            run_threads(ranks, save)
        step[0] = max(1, args.generations)
    proxy.clear()
    if counting is not None:
        counting.reset()
    wall, commit, failures = run_threads(ranks, save)
    total = proxy.total()
    refreshes = counting.total(op="put", kind="lease") - ranks if counting is not None else 0
    hottest = max(proxy.partitions.values(), default=0)
    return Row(ranks, case, total, total / ranks, proxy.total("throttled"), commit, wall, failures, refreshes, hottest)


# ---- the coordinator alone, 10 ms per request ------------------------------------------------


def memory_store(delay: float) -> tuple[Any, Any]:
    from obstore.store import MemoryStore

    bare = ObjectStore("memory://bench", MemoryStore(), "")
    return ResilientStore(bare), ResilientStore(LatencyStore(bare, delay))


def coordinator_new(ranks: int, tensors: int, delay: float) -> float:
    fast, slow = memory_store(delay)
    generation = layout.generation_name(1, "coord")
    items = normalize(state(0, tensors, 64))
    for rank in range(ranks):
        writer.write_part(fast, generation, 1, rank, ranks, items, "xxh3_128")
    started = time.monotonic()
    writer.commit(slow, generation, 1, ranks, "xxh3_128", timeout=3600)
    return time.monotonic() - started


def coordinator_old(ranks: int, tensors: int, delay: float) -> float:
    """The old coordinator: every part in rank order, then a HEAD per object, 8 at a time."""
    fast, slow = memory_store(delay)
    generation = layout.generation_name(1, "coord")
    entries_per_rank = []
    for rank in range(ranks):
        objects = []
        for index in range(tensors):
            path = layout.legacy_object_path(generation, rank, index, f"t{index}")
            fast.put(path, b"x" * 64)
            objects.append({"path": path, "size": 64})
        fast.put(f"{layout.GENERATIONS}/{generation}/part-r{rank:05d}.json", json.dumps({"objects": objects}).encode())
        entries_per_rank.append(objects)
    started = time.monotonic()
    entries = []
    for rank in range(ranks):
        entries.extend(json.loads(bytes(slow.get(f"{layout.GENERATIONS}/{generation}/part-r{rank:05d}.json")))["objects"])
    check_all(slow, entries)
    slow.put_if_absent(layout.commit_path(1), b"{}")
    slow.get(layout.commit_path(1))
    return time.monotonic() - started


# ---- the formulas at the published rates -------------------------------------------------------


def formula(case: str, ranks: int, tensors: int) -> tuple[int, int, int]:
    """(writes, reads, reads on the hottest prefix) of one generation, polls left out."""
    if case == "old":
        writes = ranks * (3 * tensors + 3) + 1  # lease + delete, 3 per multipart object, part; marker
        reads = ranks * (2 * tensors + 3) + 1  # marker check, HEAD per object (rank + coordinator), part x2; marker
        return writes, reads, reads  # every object of a generation shares one prefix
    writes = 3 * ranks + 1  # lease, shard, part; marker
    reads = 4 * ranks + 1  # marker check, HEAD x2, part; marker
    hottest = max(ranks + 1, math.ceil(3 * ranks / HASH_PREFIXES))  # the step's marker, read once by every rank
    return writes, reads, hottest


def request_seconds(case: str, ranks: int, tensors: int) -> dict[str, float]:
    writes, reads, hottest = formula(case, ranks, tensors)
    if case == "old":
        s3 = max(writes / S3_WRITES_PER_PREFIX, reads / S3_READS_PER_PREFIX)
    else:
        per_prefix_writes = math.ceil(3 * ranks / HASH_PREFIXES)
        s3 = max(per_prefix_writes / S3_WRITES_PER_PREFIX, hottest / S3_READS_PER_PREFIX)
    return {
        "requests": writes + reads,
        "s3": s3,
        "gcs": max(writes / GCS_WRITES, reads / GCS_READS),
        "azure": (writes + reads) / AZURE_REQUESTS,
    }


def coordinator_formula(case: str, ranks: int, tensors: int, delay: float = 0.010) -> float:
    if case == "old":
        return (ranks + math.ceil(ranks * tensors / 8) + 2) * delay
    return (2 * math.ceil(ranks / writer.GATHER_WORKERS) + 2) * delay


# ---- main ----------------------------------------------------------------------------------------


def start_moto() -> tuple[Any, dict[str, Any]]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    creds = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench", "region_name": "us-east-1"}
    boto3.client("s3", endpoint_url=endpoint, **creds).create_bucket(Bucket="bench")
    options = {
        "endpoint": endpoint,
        "access_key_id": "bench",
        "secret_access_key": "bench",
        "region": "us-east-1",
        "client_options": {"allow_http": True, "pool_max_idle_per_host": "64"},
    }
    return server, options


def measure(args: Any) -> dict[str, Any]:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    threading.stack_size(512 << 10)
    CheckpointManager._prune = lambda self: None  # type: ignore[method-assign]  # retention is counted apart
    writer.POLL_BUDGET_PER_SECOND *= args.scale  # the gang polls within the scaled store's rates
    ranks_list = [int(x) for x in args.ranks.split(",") if x]
    server, options = start_moto()
    rows: list[Row] = []
    try:
        proxy = FaultProxy(
            options["endpoint"],
            write_rate=S3_WRITES_PER_PREFIX * args.scale,
            read_rate=S3_READS_PER_PREFIX * args.scale,
            prefix_depth=4,
        ).start()
        run_id = uuid.uuid4().hex[:8]
        for ranks in ranks_list:
            for case in ("old", "new", "new+group"):
                if (case == "old" and ranks > args.old_max_ranks) or (case == "new" and ranks > args.poll_max_ranks):
                    continue
                row = live_round(proxy, options, run_id, ranks, case, args)
                rows.append(row)
                print(
                    f"  N={ranks:5d} {case:9s} {row.requests:8d} requests  {row.throttled:6d} x 503  "
                    f"commit {row.commit_seconds:7.2f}s  save {row.save_seconds:7.2f}s",
                    file=sys.stderr,
                    flush=True,
                )
        proxy.stop()
    finally:
        server.stop()
    commit_rows = []
    for ranks in [int(x) for x in args.commit_ranks.split(",") if x]:
        new = coordinator_new(ranks, args.tensors, args.latency_ms / 1000)
        old = coordinator_old(ranks, args.tensors, args.latency_ms / 1000) if ranks <= args.old_commit_max else None
        commit_rows.append({"ranks": ranks, "new": new, "old": old})
        print(f"  coordinator N={ranks}: new {new:.2f}s old {old if old is None else round(old, 2)}", file=sys.stderr)
    return {
        "scale": args.scale,
        "tensors": args.tensors,
        "tensor_bytes": args.tensor_bytes,
        "live": [asdict(r) for r in rows],
        "coordinator": commit_rows,
    }


def report(result: dict[str, Any], args: Any) -> None:
    print(
        f"\n== one generation, N ranks x {result['tensors']} tensors of {result['tensor_bytes']} B, moto S3 behind "
        f"503 SlowDown at {result['scale']:g} x the published per-prefix rates =="
    )
    print(
        f"{'N':>5} {'layout':10} {'requests':>9} {'per rank':>9} {'refreshes':>9} {'503s':>7} {'commit s':>9} "
        f"{'save s':>8} {'vs old':>7}"
    )
    old_by_n = {r["ranks"]: r for r in result["live"] if r["case"] == "old"}
    for r in result["live"]:
        old = old_by_n.get(r["ranks"])
        ratio = f"{old['requests'] / r['requests']:6.1f}x" if old and r["case"] != "old" else ""
        fail = f"  ({r['failures']} failed)" if r["failures"] else ""
        print(
            f"{r['ranks']:5d} {r['case']:10} {r['requests']:9d} {r['per_rank']:9.1f} {r.get('refreshes', 0):9d} "
            f"{r['throttled']:7d} {r['commit_seconds']:9.2f} {r['save_seconds']:8.2f} {ratio:>7}{fail}"
        )
    print(
        "requests: HTTP requests the proxy saw (multipart parts, obstore's and the library's retries included); "
        "refreshes: lease PUTs of saves longer than 5 s; vs old: old requests / these; commit s: the coordinator "
        "from its own part to the marker (late parts included)"
    )
    print(f"\n== the coordinator's commit alone, {args.latency_ms:g} ms per request, {result['tensors']} tensors per rank ==")
    print(f"{'N':>5} {'new s':>8} {'old s':>8} {'old/new':>8} {'new, formula':>13} {'old, formula':>13}")
    for c in result["coordinator"]:
        old, new = c["old"], c["new"]
        old_s = "-" if old is None else f"{old:8.2f}"
        ratio = "-" if old is None else f"{old / new:7.1f}x"
        print(
            f"{c['ranks']:5d} {new:8.2f} {old_s:>8} {ratio:>8} "
            f"{coordinator_formula('new', c['ranks'], result['tensors'], args.latency_ms / 1000):13.2f} "
            f"{coordinator_formula('old', c['ranks'], result['tensors'], args.latency_ms / 1000):13.2f}"
        )
    t = args.extrapolate_tensors
    print(f"\n== the formulas at the published rates: N ranks x {t} tensors (polls and lease refreshes left out) ==")
    print(
        f"{'N':>5} {'layout':6} {'requests':>10} {'S3 s':>8} {'GCS s':>8} {'Azure s':>8} {'coordinator s (10 ms)':>22}"
    )
    for ranks in (8, 64, 256, 1024):
        for case in ("old", "new"):
            s = request_seconds(case, ranks, t)
            print(
                f"{ranks:5d} {case:6} {int(s['requests']):10d} {s['s3']:8.2f} {s['gcs']:8.2f} {s['azure']:8.2f} "
                f"{coordinator_formula(case, ranks, t):22.2f}"
            )
    print(
        "S3: 3,500 writes/s and 5,500 reads/s per prefix (old: one prefix per generation; new: 256 hash prefixes, "
        "the step's marker read by every rank); GCS: 1,000 writes/s and 5,000 reads/s per bucket at first; "
        "Azure: 20,000 requests/s per account"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="8,64,256,1024", help="simulated ranks per round (default 8,64,256,1024)")
    parser.add_argument("--tensors", type=int, default=16, help="tensors per rank (default 16)")
    parser.add_argument("--tensor-bytes", type=int, default=4096, help="bytes per tensor (default 4096)")
    parser.add_argument("--scale", type=float, default=0.05, help="fraction of S3's published rates (default 0.05)")
    parser.add_argument("--old-max-ranks", type=int, default=64, help="largest N for the old layout's live round")
    parser.add_argument(
        "--old-timeout", type=float, default=120, help="the old rounds' commit timeout (the old default: 600 s)"
    )
    parser.add_argument("--poll-max-ranks", type=int, default=256, help="largest N for the store-polling 'new' round")
    parser.add_argument("--commit-ranks", default="64,256,1024", help="N for the coordinator-alone rounds")
    parser.add_argument("--old-commit-max", type=int, default=1024, help="largest N for the old coordinator round")
    parser.add_argument("--latency-ms", type=float, default=10.0, help="per-request delay of the coordinator rounds")
    parser.add_argument("--extrapolate-tensors", type=int, default=900, help="tensors per rank for the formulas")
    parser.add_argument(
        "--generations", type=int, default=2, help="saves per new-layout round; the last one is measured (default 2)"
    )
    parser.add_argument("--json", help="also write the measurements to this file")
    args = parser.parse_args(argv)
    result = measure(args)
    report(result, args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
