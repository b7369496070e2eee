"""The README's own-stack recipe works as written, under a project name that is not ``spotgpu``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from package_fixtures import REPO

_BLOCK = re.compile(r"```(?:yaml|python)\n# (my-stack/[^\n]+)\n(.*?)```", re.S)


def readme_files() -> dict[str, str]:
    """``{relative path: text}`` of every README block that starts with ``# my-stack/<file>``."""
    text = (REPO / "README.md").read_text()
    return {path: body for path, body in _BLOCK.findall(text)}


def test_readme_names_both_files() -> None:
    assert set(readme_files()) == {"my-stack/Pulumi.yaml", "my-stack/__main__.py"}


def test_readme_stack_previews_with_economics(tmp_path: Path) -> None:
    for rel, body in readme_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    project = tmp_path / "my-stack"
    shutil.copy(REPO / "stacks" / "Pulumi.dev.yaml", project / "Pulumi.dev.yaml")
    run = subprocess.run(
        [sys.executable, "-m", "spotgpu", "preview", "--program", str(project), "--stack", "dev", "--json",
         "--policy-config", str(REPO / "policy-config.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["project"] == "ml-gpu"
    pools = {r["name"] for r in doc["resources"] if r["type"].endswith(":GpuPool")}
    assert pools == {"dev-aws", "dev-gcp", "dev-az"}
    assert set(doc["economics"]["pools"]) == pools
    assert set(doc["outputs"]) == pools
    assert not [v for v in doc["policy"]["violations"] if v["level"] == "mandatory"]
