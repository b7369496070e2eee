"""``spotgpu preview`` exit codes: 2 for every config, YAML, model, plan or program error (one line), 1 only
for a mandatory policy violation. Run in-process through the command's own argparse registration."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from spotgpu_pulumi.offline.cli import register

REPO = Path(__file__).resolve().parents[2]


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["preview", *argv])
    return int(args.func(args))


def _project(tmp_path: Path, stack_text: str, program: str | None = None) -> Path:
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(REPO / "Pulumi.yaml", project)
    (project / "stacks" / "__main__.py").write_text(program or (REPO / "stacks" / "__main__.py").read_text())
    (project / "stacks" / "Pulumi.t.yaml").write_text(stack_text)
    return project


DEV = (REPO / "stacks" / "Pulumi.dev.yaml").read_text()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DEV.replace("  spotgpu:owner: ml-platform", "\tspotgpu:owner: ml-platform"), "YAML syntax error"),
        (DEV.replace("zones: [us-central1-a, us-central1-b]", "zones: [us-central1-a, us-central1-a]"),
         "spotgpu:pools[dev-gcp].zones: lists a zone twice"),
        (DEV.replace("spotgpu:pools:", "spotgpu:pool:"), "did you mean spotgpu:pools?"),
        (DEV.replace("  spotgpu:owner: ml-platform", "  owner: ml-platform"), "owner: config key has no namespace"),
        ("config:\n  - a\n", "config: must be a mapping"),
    ],
)
def test_config_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                            expected: str) -> None:
    code = _run(["--program", str(_project(tmp_path, text)), "--stack", "t", "--no-policy"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and expected in err and "fix:" in err, err


def test_a_plan_error_inside_the_program_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The AWS planner handed a GCP pool: a plan error raised inside the running program."""
    program = (
        "import pulumi\n"
        "from spotgpu_pulumi.args import PoolArgs\n"
        "from spotgpu_pulumi.aws import GpuPool, plan_pool\n"
        "from spotgpu_pulumi.offline.validate import plan_engine_config\n"
        "from pulumi.runtime.config import CONFIG\n"
        "config = plan_engine_config(dict(CONFIG.get())).config\n"
        "gcp = next(p for p in config.pools if p.cloud == 'gcp')\n"
        "GpuPool('wrong', plan_pool(PoolArgs.for_pool(config, gcp)))\n"
    )
    code = _run(["--program", str(_project(tmp_path, DEV, program)), "--stack", "t", "--no-policy"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "spotgpu:pools[dev-gcp].cloud: spotgpu_pulumi.aws.plan_pool plans only AWS pools" in err


def test_a_bug_in_the_program_exits_2_not_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run(["--program", str(_project(tmp_path, DEV, "x = 1 / 0\n")), "--stack", "t", "--no-policy"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "ZeroDivisionError" in err
