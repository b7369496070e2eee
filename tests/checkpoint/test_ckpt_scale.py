"""The small version of bench/ckpt_scale.py (issue 32 item 6), run as a user would run it.

8 and 24 simulated ranks with 8 tensors each, moto S3 behind the 503 SlowDown proxy at 1/20
of S3's published per-prefix rates: the counts are checked, not the seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from spotgpu.checkpoint import layout

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_the_scale_bench_small(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    cmd = [
        sys.executable, "bench/ckpt_scale.py", "--ranks", "8,24", "--tensors", "8", "--scale", "0.05",
        "--old-max-ranks", "24", "--commit-ranks", "64", "--json", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=280, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    rows = {(r["ranks"], r["case"]): r for r in result["live"]}
    assert all(r["failures"] == 0 for r in rows.values()), rows
    for n in (8, 24):
        group, polled, old = rows[(n, "new+group")], rows[(n, "new")], rows[(n, "old")]
        assert group["requests"] == 7 * n + 2 and group["throttled"] == 0  # on the wire, through the proxy
        assert polled["requests"] > group["requests"]  # the polls, nothing else
        assert old["requests"] >= n * (5 * 8)  # 5 per tensor per rank before (3 for the multipart, 2 HEADs)
    # One hot prefix per generation before, 256 hash prefixes now: counted per prefix, not timed (whether the
    # throttle answers 503 also depends on how fast a loaded box sends; the bench's 64-rank row shows that).
    old, new = rows[(24, "old")]["hottest_prefix"], rows[(24, "new+group")]["hottest_prefix"]
    # now the busiest key is the step's marker (every rank reads it once, the coordinator writes it) or a
    # hash prefix's ranks (7 requests each); before, every object and poll of a generation met in one prefix
    sharing = max(Counter(layout.rank_bucket(rank) for rank in range(24)).values())
    assert old >= 24 * 8 * 3 and new <= max(24 + 2, 7 * sharing), (old, new, sharing)
    (coordinator,) = result["coordinator"]
    assert coordinator["new"] < coordinator["old"]
    assert "the formulas at the published rates" in proc.stdout and "1024 new" in " ".join(proc.stdout.split())
