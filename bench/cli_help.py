"""How long ``spotgpu --help`` (and a few light commands' help) take, whole process, vs ``python -c pass``.

    .venv/bin/python bench/cli_help.py [--runs 15] [--before /path/to/other/checkout]

Each row is a fresh interpreter (what a user waits for), timed wall-clock; the runs are
interleaved so machine drift hits every row alike; the table prints medians and the ratio to
the baseline measured in the same run. ``--before`` adds the same rows run against another
checkout of the repository (e.g. the commit before the lazy CLI) via ``PYTHONPATH``, for a
before/after comparison side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from spotgpu.cliutil import Progress

REPO = Path(__file__).resolve().parents[1]
ROWS = {
    "spotgpu --help": ["--help"],
    "spotgpu ckpt --help": ["ckpt", "--help"],
    "spotgpu drill aws --help": ["drill", "aws", "--help"],
}


def _time(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    # cwd is the tree under test: `python -m` puts the working directory first on sys.path.
    subprocess.run(cmd, cwd=env["PYTHONPATH"].split(os.pathsep)[0], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'policies'}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--before", type=Path, help="another checkout to time the same commands against")
    args = parser.parse_args()
    trees = {"": REPO} | ({"before: ": args.before.resolve()} if args.before else {})
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "baseline: python -c pass": ([sys.executable, "-c", "pass"], _env(REPO)),
    }
    for prefix, tree in trees.items():
        for name, argv in ROWS.items():
            commands[prefix + name] = ([sys.executable, "-m", "spotgpu", *argv], _env(tree))
    for cmd, env in commands.values():  # warm the file cache and the bytecode caches
        _time(cmd, env)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    with Progress("timing") as progress:  # a spinner on a terminal only
        for run in range(args.runs):
            progress.update(f"run {run + 1}/{args.runs}")
            for name, (cmd, env) in commands.items():
                samples[name].append(_time(cmd, env))
    base = statistics.median(samples["baseline: python -c pass"])
    print(f"{'command':36} {'median s':>9} {'min s':>7} {'max s':>7} {'x baseline':>10}")
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"{name:36} {med:9.3f} {min(values):7.3f} {max(values):7.3f} {med / base:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
