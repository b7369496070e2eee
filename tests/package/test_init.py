"""``spotgpu init`` writes the template's project offline; ``spotgpu preview`` from inside it is clean.

Issue 25, item 3: each named defect has a test here (the preview's default program, the
``template:`` block left in, JSON strings for structured config, a comment naming a module
attribute that does not exist, ``acme:owner`` without a hint, the sdist without the
Dockerfile and the policy pack, the Lambda zip warning's relative path).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from package_fixtures import REPO

from spotgpu.config import ConfigError, stack_config_from_engine
from spotgpu_pulumi.offline.cli import check_config
from spotgpu_pulumi.templates import TEMPLATE_DIR

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "policies")])}


def spotgpu(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=ENV)  # fmt: skip


def init(tmp_path: Path, *args: str) -> Path:
    run = spotgpu("init", "gpu-pools", "--owner", "vision-team", *args, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    return tmp_path / "gpu-pools"


def pulumi_rules(doc: dict[str, Any]) -> list[str]:
    """Pulumi's own checks of a project's ``config:`` block (sdk/go/common/workspace/project.go)."""
    problems = []
    for key, spec in (doc.get("config") or {}).items():
        own = ":" not in key or key.startswith(f"{doc['name']}:")
        if not own and isinstance(spec, dict) and ({"type", "default"} & set(spec) or "value" not in spec):
            problems.append(f"{key}: not namespaced by the project, so only `value:` is allowed")
    return problems


def json_strings(node: Any, at: str = "") -> list[str]:
    """Values that are JSON text instead of YAML structure."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in json_strings(v, f"{at}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in json_strings(v, f"{at}[{i}]")]
    return [at] if isinstance(node, str) and node.strip()[:1] in ("{", "[") else []


@pytest.mark.timeout(300)
def test_init_then_preview_from_inside_the_project(tmp_path: Path) -> None:
    project = init(tmp_path, "--clouds", "aws,gcp")
    assert sorted(p.name for p in project.iterdir()) == [
        ".gitignore", "Pulumi.dev.yaml", "Pulumi.yaml", "__main__.py", "policy-config.json", "requirements.txt",
    ]
    run = spotgpu("preview", "--stack", "dev", "--json", cwd=project)  # no --program: the current directory
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["project"] == "gpu-pools"
    assert not [v for v in doc["policy"]["violations"] if v["level"] == "mandatory"]
    assert set(doc["outputs"]) == {"dev-aws", "dev-gcp"}
    # Messages name paths absolutely: the Lambda zip is looked for in the project, and said so.
    assert f"{project / 'dist' / 'spotgpu-controller-lambda.zip'} does not exist yet" in run.stderr


def test_init_writes_the_template_shape_in_structured_yaml(tmp_path: Path) -> None:
    project = init(tmp_path, "--name", "ml-gpu")
    pulumi_yaml = yaml.safe_load((project / "Pulumi.yaml").read_text())
    assert "template" not in pulumi_yaml and pulumi_yaml["name"] == "ml-gpu"
    template = yaml.safe_load((TEMPLATE_DIR / "Pulumi.yaml").read_text())
    assert {k: v for k, v in template.items() if k not in ("template", "name", "description")} == {
        k: v for k, v in pulumi_yaml.items() if k not in ("name", "description")
    }
    assert pulumi_rules(pulumi_yaml) == []
    stack = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())
    assert stack["config"]["spotgpu:owner"] == "vision-team"
    assert json_strings(pulumi_yaml) == [] and json_strings(stack) == []
    assert isinstance(pulumi_yaml["config"]["spotgpu:pools"]["value"], list)
    assert (project / "__main__.py").read_text() == (REPO / "stacks" / "__main__.py").read_text()


def test_init_with_a_local_wheel_pins_it_in_requirements(tmp_path: Path) -> None:
    wheel = tmp_path / "spotgpu-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    project = init(tmp_path, "--wheel", str(wheel))
    lines = [x for x in (project / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert lines == [f"spotgpu[pulumi] @ {wheel.as_uri()}"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--clouds", "aws,oci"], "--clouds: names no cloud or an unknown one ['oci']"),
        (["--name", "bad name"], "--name 'bad name': not a Pulumi project name"),
        (["--wheel", "nowhere.whl"], "no such wheel file"),
    ],
)
def test_init_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    run = spotgpu("init", "p", "--owner", "t", *args, cwd=tmp_path, timeout=60)
    assert run.returncode == 2 and message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "p").exists()


def test_init_never_overwrites_a_project(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "Pulumi.yaml").write_text("name: mine\n")
    run = spotgpu("init", "p", "--owner", "t", cwd=tmp_path, timeout=60)
    assert run.returncode == 2 and "already holds a Pulumi project" in run.stderr
    assert (tmp_path / "p" / "Pulumi.yaml").read_text() == "name: mine\n"


def test_preview_defaults_to_the_current_directory_only_when_it_is_a_project(tmp_path: Path) -> None:
    from spotgpu_pulumi.offline.cli import default_program

    (tmp_path / "Pulumi.yaml").write_text("name: x\nruntime: python\n")
    assert default_program(tmp_path) == tmp_path.resolve()
    assert default_program(tmp_path / "..") != tmp_path.resolve()


def test_template_comments_name_things_that_exist() -> None:
    text = (TEMPLATE_DIR / "Pulumi.yaml").read_text()
    refs = set(re.findall(r"\b(spotgpu_pulumi(?:\.\w+)+)", text))
    assert refs, "the template says where it is installed"
    for ref in refs:
        module, _, attribute = ref.rpartition(".")
        assert hasattr(importlib.import_module(module), attribute), ref


def test_a_spotgpu_key_under_the_project_namespace_gets_a_did_you_mean() -> None:
    engine = {"acme:owner": "vision", "spotgpu:environment": "dev"}
    with pytest.raises(ConfigError, match=r"^acme:owner: .*fix: did you mean spotgpu:owner\?"):
        stack_config_from_engine(engine)


def test_preview_of_a_project_with_acme_owner_says_did_you_mean(tmp_path: Path) -> None:
    project = init(tmp_path)
    stack = project / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("spotgpu:owner:", "gpu-pools:owner:"))
    with pytest.raises(ConfigError, match=r"gpu-pools:owner: .*did you mean spotgpu:owner\?"):
        check_config(project, "dev")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sdist_carries_what_pulumi_up_needs(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", ".venv", ".cache", "__pycache__", ".*_cache", ".hypothesis"))  # fmt: skip
    out = tmp_path / "sdist"
    code = f"from setuptools import build_meta as b; print(b.build_sdist({str(out)!r}))"
    run = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    sdist = out / run.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    for needed in ("Dockerfile.controller", "policies/PulumiPolicy.yaml", "policies/__main__.py",
                   "policies/requirements.txt", "policies/spotgpu_guard/__init__.py", "components/template/Pulumi.yaml",
                   "CHANGELOG.md", "spotgpu/observability/dashboard.json"):  # fmt: skip
        assert needed in names, needed
