"""A plain clone is complete: the trace data lives in the repository, nothing beside it is read.

The trace-dependent tests run again from a copy of the tracked files in a temp dir with no
``shared/`` anywhere near it and ``SPOTGPU_TRACES`` unset, so a path that escapes the repository
fails here instead of on a user's clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spotgpu.traces import PACKAGED_TRACES, all_groups, load_group, traces_root

REPO = Path(__file__).resolve().parents[2]

#: The tests that read traces: the simulator replay, the estimators, the controller properties.
TRACE_TESTS = (
    "tests/economics/test_simulator_replay.py",
    "tests/economics/test_estimate_telemetry.py",
)


def test_default_traces_are_the_packaged_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPOTGPU_TRACES", raising=False)
    assert traces_root() == PACKAGED_TRACES
    assert PACKAGED_TRACES.is_relative_to(REPO / "spotgpu")
    assert all_groups() == ["1-node/aws-02-15-2023", "16-node/aws-08-27-2023"]
    assert len(load_group("1-node/aws-02-15-2023")) == 9
    assert (PACKAGED_TRACES.parent / "README.md").read_text().count("skypilot-org/spot-traces") >= 1


def test_unknown_group_names_the_known_ones() -> None:
    with pytest.raises(FileNotFoundError, match=r"1-node/aws-02-15-2023"):
        load_group("1-node/nope")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_trace_dependent_tests_pass_from_a_bare_copy(tmp_path: Path) -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    copy = tmp_path / "clone"
    for rel in filter(None, tracked.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / rel)
    env = {k: v for k, v in os.environ.items() if k != "SPOTGPU_TRACES"}
    env["PYTHONPATH"] = f"{copy}{os.pathsep}{copy / 'policies'}"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *TRACE_TESTS,
         "-o", "addopts=", "--rootdir", str(copy)],
        cwd=copy, env=env, capture_output=True, text=True, timeout=540,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    probe = subprocess.run(
        [sys.executable, "-c", "import spotgpu.traces as t; print(t.traces_root())"],
        cwd=copy, env=env, capture_output=True, text=True, check=True,
    )
    assert Path(probe.stdout.strip()).is_relative_to(copy), probe.stdout
