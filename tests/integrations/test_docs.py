"""docs/integrations.md's two training scripts, run exactly as written: each one stops on a
notice (exit 75, one final generation), then resumes from that generation and finishes (exit 0).
Their interval comes from an agent config file, as on a pool VM.

And the page's drill recipes, run as written (issue 31, item 6). Defect: ``spotgpu drill local
--nodes 2 -- python train_hf.py`` failed on both ranks ("/etc/spotgpu/agent.json: cannot read
the agent config"): the drill set ``SPOTGPU_AGENT`` but not what the script reads; and a
single-node job had no local agent at all (``drill local`` refused ``--nodes 1``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from integ_testkit import REPO, nodes, ranks, wait_all, wait_for_value

from spotgpu.checkpoint import CheckpointManager
from spotgpu.gang import EXIT_GANG_STOP
from spotgpu.integrations.schedule import CHECKPOINT_URL_ENV
from tests.doc_blocks import marked_block

_BLOCK = re.compile(r"```python\n# (train_\w+\.py)\n(.*?)```", re.S)


def doc_scripts() -> dict[str, str]:
    return dict(_BLOCK.findall((REPO / "docs" / "integrations.md").read_text()))


def test_the_doc_has_both_scripts() -> None:
    assert set(doc_scripts()) == {"train_hf.py", "train_lightning.py"}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", ["train_hf.py", "train_lightning.py"])
def test_doc_script_stops_on_a_notice_and_resumes(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / name
    script.write_text(doc_scripts()[name])
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps({"provider": "gcp", "pool": "p", "notice": {"provider": "gcp"}, "checkpointStore": "file:///x",
                    "checkpointIntervalSeconds": 1})
    )
    url = f"file://{tmp_path / 'store'}"
    monkeypatch.setenv(CHECKPOINT_URL_ENV, url)
    monkeypatch.setenv("SPOTGPU_AGENT_CONFIG", str(config))
    with nodes(1) as (vm,), ranks(script, [], 1, [vm.address], tmp_path / "first", cwd=tmp_path) as procs:
        wait_for_value(lambda: vm.agent.state.workload_pgids, 90, procs, tmp_path / "first")  # resume_from ran
        vm.fake.raise_preempted()
        assert wait_all(procs, 90, tmp_path / "first") == [EXIT_GANG_STOP]
    final = CheckpointManager(url).list()[0]
    assert final.committed
    with nodes(1) as (vm,), ranks(script, [], 1, [vm.address], tmp_path / "second", cwd=tmp_path) as procs:
        assert wait_all(procs, 90, tmp_path / "second") == [0]
    restored = {"train_hf.py": f"out/checkpoint-{final.step}", "train_lightning.py": f"restore/step-{final.step}"}
    assert (tmp_path / restored[name]).is_dir()  # resume_from materialised the final generation


def drill_recipes() -> list[str]:
    return [line for line in marked_block("integrations.md", "drill-recipes").splitlines() if line.strip()]


def test_the_drill_recipes_name_both_scripts() -> None:
    assert [line.split()[-1] for line in drill_recipes()] == ["train_hf.py", "train_lightning.py"]


@pytest.mark.timeout(420)
@pytest.mark.parametrize("index", [0, 1], ids=["hf-2-nodes", "lightning-1-node"])
def test_each_drill_recipe_runs_as_written(tmp_path: Path, index: int) -> None:
    """The command line from the page, from the scripts' directory, with ``spotgpu`` on PATH as installed."""
    for name, code in doc_scripts().items():
        (tmp_path / name).write_text(code)
    command = drill_recipes()[index]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPOTGPU_")}  # nothing from the test's own setup
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "drill passed" in run.stdout
    assert "final checkpoint: committed at step" in run.stdout
    # The drill's VMs have a local tier: the callbacks save and restore through it (docs: "With checkpoint tiers").
    if index == 0:  # the page's restore report, its numbers the run's own
        for line in marked_block("integrations.md", "drill-tier-report").splitlines():
            assert re.search(report_line(line), run.stdout, re.M), f"{line!r} not in:\n{run.stdout}"
    else:  # the only node was replaced: no tier and no peer left, the final checkpoint's upload
        assert re.search(r"^  node1 restored step \d+ from store in ", run.stdout, re.M), run.stdout


def report_line(line: str) -> str:
    """A documented report line as a pattern: its step, seconds and sizes are the run's own."""
    return "^" + re.sub(r"(?<= )\d+(?:\\\.\d+)?", lambda _: r"[\d.]+", re.escape(line)) + "$"
