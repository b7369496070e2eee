"""One stack reader for every command that takes ``--stack`` (issue 31, item 3).

Defect: ``spotgpu init`` writes the starter workloads, ladders and pools to the project-level
``config:`` of ``Pulumi.yaml``; the preview read that level, but ``cost --stack`` and
``simulate --stack`` read only ``Pulumi.<stack>.yaml`` and failed inside the very project
``init`` wrote ("spotgpu:workloads: required key is missing ... fix: define at least one
workload profile"). And ``spotgpu preview`` outside any project previewed the package's own
stack instead of saying it found no Pulumi.yaml.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotgpu.config import ConfigError
from spotgpu.project import engine_config, load_project, load_stack

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "policies")])}


def spotgpu(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=ENV)  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("init")
    run = spotgpu("init", "gpu-pools", "--owner", "vision-team", "--clouds", "aws,gcp", cwd=root, timeout=120)
    assert run.returncode == 0, run.stderr
    return root / "gpu-pools"


def test_cost_stack_reads_the_project_level_config_init_wrote(project: Path) -> None:
    assert "spotgpu:pools" not in (project / "Pulumi.dev.yaml").read_text()  # init put them in Pulumi.yaml
    run = spotgpu("cost", "--stack", "dev", "--pool", "dev-aws", "--json", cwd=project, timeout=120)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["workload"] == "smoke-train" and doc["ladder"] == "dev"


def test_simulate_stack_reads_the_project_level_config_init_wrote(project: Path) -> None:
    run = spotgpu("simulate", "--stack", "dev", "--pool", "dev-gcp", "--trace-group", "1-node/aws-02-15-2023",
                  "--max-starts", "1", "--json", cwd=project, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["job"]["workHours"] == 4.0


@pytest.mark.timeout(300)
def test_cost_and_the_preview_price_a_pool_from_the_same_config(project: Path) -> None:
    preview = spotgpu("preview", "--stack", "dev", "--no-policy", "--json", cwd=project)
    assert preview.returncode == 0, preview.stderr
    cost = spotgpu("cost", "--stack", "dev", "--pool", "dev-gcp", "--json", cwd=project, timeout=120)
    assert cost.returncode == 0, cost.stderr
    pool = json.loads(preview.stdout)["economics"]["pools"]["dev-gcp"]
    # The replay check beside the model is the preview's own, in `cost --stack` too (one function)
    assert pool["replay"]["line"] == "model only, no traces for this cloud"
    assert json.loads(cost.stdout) == pool


def test_the_stack_file_overrides_the_project_level_key_by_key_under_stack_config_dir(tmp_path: Path, project: Path) -> None:
    """``stackConfigDir`` moves the stack files; a key in Pulumi.<stack>.yaml wins over Pulumi.yaml's."""
    (tmp_path / "p").mkdir()
    text = (project / "Pulumi.yaml").read_text()
    (tmp_path / "p" / "Pulumi.yaml").write_text(text + "\nstackConfigDir: envs\n")
    (tmp_path / "p" / "envs").mkdir()
    (tmp_path / "p" / "envs" / "Pulumi.stage.yaml").write_text(
        "config:\n  spotgpu:environment: stage\n  spotgpu:owner: other-team\n  spotgpu:clouds: aws\n  aws:region: us-east-1\n"
    )
    config = load_stack("stage", tmp_path / "p")
    assert config.owner == "other-team" and config.environment == "stage"
    assert [p.name for p in config.pools] == ["dev-aws"]  # the pools come from Pulumi.yaml, the clouds from the stack
    engine = engine_config(load_project(tmp_path / "p"), "stage")
    assert json.loads(engine["spotgpu:workloads"])["smoke-train"]["workHours"] == 4
    with pytest.raises(ConfigError, match=r"--stack 'dev': no .*envs/Pulumi.dev.yaml.*fix: use one of stage"):
        load_stack("dev", tmp_path / "p")


def test_outside_a_project_every_stack_command_says_it_found_no_pulumi_yaml(tmp_path: Path) -> None:
    """Defect: the preview fell back to the package's own stack (104 resources, project spotgpu)."""
    for args in (("preview", "--stack", "dev", "--no-policy"), ("cost", "--stack", "dev", "--pool", "dev-aws"),
                 ("simulate", "--stack", "dev", "--pool", "dev-aws")):  # fmt: skip
        run = spotgpu(*args, cwd=tmp_path, timeout=120)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert run.stdout == ""
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and f"found no Pulumi.yaml in {tmp_path.resolve()}" in lines[0], run.stderr
        assert "--program DIR" in lines[0]
