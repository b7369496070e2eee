"""The Hugging Face callback through ``spotgpu drill local`` (the multi-node drill): 2 simulated
VMs, each a fake metadata server, a real ``spotgpu agent run`` and a real ``spotgpu gang run --
torchrun``; a notice on node 1 once every rank restored, then a replacement VM. The drill
checks one stop step, the committed final generation and the resumed step; the test then
checks that the resumed per-step losses and parameters equal an uninterrupted run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integ_testkit import read_json

from spotgpu.drills.local import LocalDrill, run_drill

JOB = Path(__file__).with_name("hf_job.py")
STEPS = 40


@pytest.mark.timeout(240)
def test_hf_callback_through_the_local_drill(tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'ckpt'}"
    out = tmp_path / "out"
    spec = LocalDrill(
        command=[str(JOB), str(out), url, "--steps", str(STEPS), "--step-seconds", "0.1", "--then-reference"],
        nodes=2,
        notice_node=1,
        provider="gcp",
        checkpoint_url=url,
        timeout_seconds=200,
        workdir=tmp_path / "drill",
    )
    report = run_drill(spec, say=lambda line: print(line, flush=True))
    doc = report.document()
    print(json.dumps(doc, indent=1))
    assert doc["status"] == "passed", doc["reasons"]
    stop = doc["finalCheckpoint"]["step"]
    assert doc["finalCheckpoint"]["committed"] and 0 < stop < STEPS
    for rank in range(2):
        before = read_json(out / f"run-losses-r{rank}-from0.json")
        after = read_json(out / f"run-losses-r{rank}-from{stop}.json")
        results = read_json(out / f"result-r{rank}-from{stop}.json")
        assert sorted(map(int, before)) == list(range(1, stop + 1))
        assert {**before, **after} == read_json(out / f"reference-losses-r{rank}-from0.json")
        assert results["run"]["params"] == results["reference"]["params"]
