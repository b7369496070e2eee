"""How long the offline preview of a stack takes, against the cost of just loading Pulumi.

    .venv/bin/python bench/preview.py [--stack prod] [--runs 5]

Prints a table of wall-clock medians and the ratio to the baseline (a process
that only imports the three provider SDKs and the policy SDK), measured side by
side in one run. The issue's target is 10 s or less for the prod stack on a
2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = "import pulumi, pulumi_aws, pulumi_gcp, pulumi_azure_native, pulumi_policy"


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    commands = {
        "baseline: import SDKs": [sys.executable, "-c", BASELINE],
        f"preview {args.stack} (no policy)": [
            sys.executable,
            "-m",
            "spotgpu",
            "preview",
            "-s",
            args.stack,
            "--json",
            "--no-policy",
        ],
        f"preview {args.stack} --json": [sys.executable, "-m", "spotgpu", "preview", "-s", args.stack, "--json"],
    }
    _time(commands["baseline: import SDKs"])  # warm the file cache
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():  # interleaved, so drift hits every row alike
            samples[name].append(_time(cmd))
    base = statistics.median(samples["baseline: import SDKs"])
    print(f"{'command':34} {'median s':>9} {'min s':>7} {'max s':>7} {'x baseline':>10}")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:34} {med:9.2f} {min(values):7.2f} {max(values):7.2f} {med / base:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
