"""The runtime installs on a GPU VM without any Pulumi package."""

from __future__ import annotations

import ast
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_runtime_package_never_imports_pulumi_or_components() -> None:
    offenders = [
        f"{p.relative_to(REPO)}: {sorted(n for n in _imports(p) if n.startswith('pulumi') or n in ('components', 'spotgpu_pulumi'))}"
        for p in sorted((REPO / "spotgpu").rglob("*.py"))
        if any(n.startswith("pulumi") or n in ("components", "spotgpu_pulumi") for n in _imports(p))
    ]
    assert offenders == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fresh_virtualenv_gets_cli_and_no_pulumi(tmp_path: Path) -> None:
    env_dir = tmp_path / "vm"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c", str(REPO / "constraints.txt"),
         str(REPO)],
        check=True,
        timeout=540,
    )
    listed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True
    ).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert "spotgpu" in installed
    assert not [name for name in installed if name.startswith("pulumi")], installed
    # The CLI runs, and the Pulumi-only command explains itself instead of crashing.
    help_text = subprocess.run(
        [str(env_dir / "bin" / "spotgpu"), "--help"], check=True, capture_output=True, text=True
    ).stdout
    assert "preview" in help_text
    preview = subprocess.run(
        [str(env_dir / "bin" / "spotgpu"), "preview", "--stack", "dev"], capture_output=True, text=True
    )
    assert preview.returncode == 2
    assert "pip install 'spotgpu[pulumi]'" in preview.stderr
    # Runtime modules import without Pulumi.
    subprocess.run([str(py), "-c", "import spotgpu.models, spotgpu.bootstrap, spotgpu.contract.tags"], check=True)
    # The GPU catalogue's data ships in the wheel (validation reads it on any machine).
    subprocess.run([str(py), "-c", "from spotgpu import catalogue as c; assert c.aws_gpu('g5.xlarge') and "
                    "c.gcp_machine('g2-standard-8') and c.azure_size('Standard_NC4as_T4_v3') and "
                    "c.on_demand_price('aws', 'g5.xlarge', 'us-east-1')"], check=True)
    assert sys.prefix != str(env_dir)
