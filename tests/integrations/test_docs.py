"""docs/integrations.md's two training scripts, run exactly as written: each one stops on a
notice (exit 75, one final generation), then resumes from that generation and finishes (exit 0).
Their interval comes from an agent config file, as on a pool VM."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from integ_testkit import REPO, nodes, ranks, wait_all, wait_for_value

from spotgpu.checkpoint import CheckpointManager
from spotgpu.gang import EXIT_GANG_STOP

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
    monkeypatch.setenv("CHECKPOINT_URL", url)
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
