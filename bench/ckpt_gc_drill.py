"""GC-race drill (issue 22): SIGKILL a saving process at random points while another
process runs ``gc`` at grace 0 the whole time, with sync and async saves mixed.

    .venv/bin/python bench/ckpt_gc_drill.py                        # 1,000 trials each
    .venv/bin/python bench/ckpt_gc_drill.py --trials 200 --baseline-trials 200

Two runs side by side on the same machine, same seed, same trial schedule:

- ``protected``: the library as it is (writers hold a lease GC honours; the coordinator
  checks every object before it writes the marker);
- ``baseline``: the behaviour before the fix (``_unprotected_baseline``: no lease, no
  object check, a GC that ignores writers at work), to show the drill can see the race.

After every kill a checker (the collector paused meanwhile) verifies every committed
generation and restores, and the table counts, per run: torn restores (bytes differ from
what was saved for that step), unverified restores (restore did not return the newest
committed step, verified: it skipped or found nothing), committed generations that fail
verify, and saves that raised. The target is 0 in the first three columns for the
protected run. A small version (100 trials) runs in the test suite.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from pathlib import Path

from spotgpu.checkpoint.crashtest import CrashReport, run_trials


def _scratch() -> Path:
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="spotgpu-gc-drill-", dir=shm if shm.is_dir() else None))


def drill(trials: int, seed: int, state_bytes: int, unprotected: bool) -> CrashReport:
    root = _scratch()
    try:
        return run_trials(
            root.as_uri(),
            trials,
            seed=seed,
            state_bytes=state_bytes,
            max_saves_before_kill=2,
            concurrent_gc=True,
            unprotected=unprotected,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def table(rows: list[tuple[str, CrashReport]]) -> str:
    headers = [
        "run", "trials", "killed mid-save", "commits", "torn restores", "unverified restores",
        "committed failing verify", "failed saves", "seconds",
    ]
    cells = [
        [
            name, str(r.trials), str(r.killed_mid_save), str(r.commits), str(r.torn_restores),
            str(r.unverified_restores), str(r.committed_failing_verify), str(r.failed_saves), f"{r.seconds:.0f}",
        ]
        for name, r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000, help="protected trials (default 1000)")
    parser.add_argument("--baseline-trials", type=int, default=1000, help="baseline trials (default 1000; 0 skips it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state-bytes", type=int, default=32 << 10)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the baseline's skipped generations would flood stderr
    rows = [("protected", drill(args.trials, args.seed, args.state_bytes, unprotected=False))]
    print(table(rows), flush=True)  # the protected figures first, in case the baseline is interrupted
    print(flush=True)
    if args.baseline_trials:
        rows.append(("baseline (no lease)", drill(args.baseline_trials, args.seed, args.state_bytes, unprotected=True)))
    print(table(rows))
    protected = rows[0][1]
    bad = protected.torn_restores + protected.unverified_restores + protected.committed_failing_verify
    for err in protected.save_errors:
        print(f"protected save error: {err}")
    for violation in protected.violations[:10]:
        print(f"protected violation: {violation}")
    print("protected run: " + ("0 torn, 0 unverified, 0 committed failing verify" if bad == 0 else "FAILED"))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
