"""Host memory of the tiered manager's background saves, with and without a memory budget.

    .venv/bin/python bench/tier_memory.py                    # 0.5 GiB state, budget 1/4 of it, 4 saves
    .venv/bin/python bench/tier_memory.py --gib 1 --share 0.125 --saves 3

One rank (``TieredCheckpointManager``, no peers: the peer copies read the committed local files
through the transport's fixed two chunks per partner, whatever the budget), a local tier and a
file store in a temporary directory on this machine's disk (``--dir``), every save uploaded
(``durable_every=1``: the upload runs beside the next save, as in a steady run). Each
configuration runs in a fresh process, one after the other: the baseline with no budget (a whole
copy of the state, reused from save to save), then ``memory_budget_bytes`` = ``--share`` x the
state. Each row is the median of the saves after the first (the first maps fresh pages), and
the first save on its own.

Columns: ``blocked`` is ``last_blocked_seconds`` (what ``save_async`` held the training thread:
the copy, and over the budget the part of the local write that overlaps it), ``commit`` the time
from the call to the generation counting, ``peak host`` the manager's own count
(``peak_host_bytes``: the copy's chunks held at once), ``peak anon`` the process's anonymous
resident memory (``RssAnon`` of /proc/self/status, sampled every 2 ms) above what it was with
the state allocated and before the first save: every copy any thread made, the upload included
(the upload maps the committed files: page cache, not anonymous). Ratios are budget / baseline.

Nothing here asserts timings; the numbers and the command go to bench/README.md.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 1 << 20


def rss_anon() -> int:
    """This process's anonymous resident bytes (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status (Linux only)")


class Sampler:
    """The highest ``RssAnon`` seen while running, sampled every ``every`` seconds on its own thread."""

    def __init__(self, every: float = 0.002) -> None:
        self.every, self.peak = every, rss_anon()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_anon())
            time.sleep(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_anon())


def state_of(gib: float) -> dict[str, np.ndarray]:
    """``gib`` GiB in eight float32 arrays (an optimizer shard's shape: a few large values)."""
    n = int(gib * (1 << 30)) // 4 // 8
    rng = np.random.default_rng(0)
    return {f"layer{i}": rng.standard_normal(n, dtype=np.float32) for i in range(8)}


def run(budget: int | None, gib: float, saves: int, where: str, out: Any) -> None:
    """One configuration in this (fresh) process; puts its figures on ``out``."""
    from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager

    state = state_of(gib)
    root = Path(where)
    tier = LocalTier(root / "local", keep=1, peer_copies=0, durable_every=1, memory_budget_bytes=budget)
    mgr = TieredCheckpointManager((root / "store").as_uri(), tier, session="bench")
    blocked, commit = [], []
    base = rss_anon()
    with Sampler() as sampler:
        for step in range(1, saves + 1):
            for value in state.values():
                value[:1] += 1.0  # training changed the state
            started = time.monotonic()
            handle = mgr.save_async(step, state)
            blocked.append(mgr.last_blocked_seconds or 0.0)
            handle.wait(600)
            commit.append(time.monotonic() - started)
        mgr.close(600)
    failed = [u.error for u in mgr.uploads() if u.error is not None]
    out.put({"blocked": blocked, "commit": commit, "peak_host": mgr.peak_host_bytes,
             "peak_anon": sampler.peak - base, "uploads": len(mgr.uploads()), "failed": [str(f) for f in failed]})  # fmt: skip


def measure(budget: int | None, args: argparse.Namespace) -> dict[str, Any]:
    where = tempfile.mkdtemp(prefix="tier-memory-", dir=args.dir)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=run, args=(budget, args.gib, args.saves, where, out))
    proc.start()
    try:
        result: dict[str, Any] = out.get(timeout=1800)
    finally:
        proc.join(60)
        if proc.is_alive() and proc.pid is not None:
            proc.kill()
        shutil.rmtree(where, ignore_errors=True)  # the tier and the store: gigabytes on a shared disk
    if result["failed"] or result["uploads"] != args.saves:
        raise SystemExit(f"budget {budget}: uploads {result['uploads']}, failed {result['failed']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--gib", type=float, default=0.5, help="state per rank, GiB (default 0.5)")
    parser.add_argument("--share", type=float, default=0.25, help="budget as a share of the state (default 0.25)")
    parser.add_argument("--saves", type=int, default=4, help="save_async calls per configuration (default 4)")
    parser.add_argument("--dir", default=None, help="where the tier and the store go (default: the temp dir)")
    args = parser.parse_args()
    state_bytes = int(args.gib * (1 << 30)) // 4 // 8 * 4 * 8
    budget = int(state_bytes * args.share)
    rows = [("no budget", measure(None, args)), (f"budget {args.share:g} x", measure(budget, args))]
    print(f"== one rank, {state_bytes / MIB:.0f} MiB state, {args.saves} save_async, every save uploaded; "
          f"budget {budget / MIB:.0f} MiB ==")  # fmt: skip
    print(f"{'config':<16}{'blocked s':>10}{'first s':>9}{'commit s':>10}{'peak host MiB':>15}{'peak anon MiB':>15}")
    figures = []
    for name, r in rows:
        later = r["blocked"][1:] or r["blocked"]
        fig = (statistics.median(later), r["blocked"][0], statistics.median(r["commit"][1:] or r["commit"]),
               r["peak_host"] / MIB, r["peak_anon"] / MIB)  # fmt: skip
        figures.append(fig)
        print(f"{name:<16}{fig[0]:>10.3f}{fig[1]:>9.3f}{fig[2]:>10.3f}{fig[3]:>15.0f}{fig[4]:>15.0f}")
    base, bounded = figures
    print(f"{'ratio':<16}{bounded[0] / base[0]:>9.2f}x{bounded[1] / base[1]:>8.2f}x{bounded[2] / base[2]:>9.2f}x"
          f"{bounded[3] / base[3]:>14.2f}x{bounded[4] / max(base[4], 1e-9):>14.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
