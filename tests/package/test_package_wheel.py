"""From a built wheel, not a checkout: components, template and policy pack all come with it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from package_fixtures import REPO
from test_package_readme import readme_files

IMPORT_NAME = "spotgpu_pulumi"
_NOT_SOURCE = (".git", "build", "dist", "*.egg-info", ".venv", ".cache", "__pycache__", ".*_cache", ".hypothesis", "tests", "bench")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_installed_wheel_previews_a_team_project(tmp_path: Path) -> None:
    # Build from a clean copy: an in-tree build would reuse (and leave) build/ in the checkout.
    source = tmp_path / "src"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(source)],
        check=True, timeout=240, cwd=tmp_path, env=_clean_env(),
    )
    wheel = next(wheels.glob("spotgpu-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
    assert top == {"spotgpu", IMPORT_NAME, "spotgpu-0.1.0.data", "spotgpu-0.1.0.dist-info"}, top
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True, timeout=240, env=_clean_env(),
    )
    # The Pulumi SDKs come from this test's environment (installing them again would take minutes);
    # a .pth line adds that site-packages *after* the new venv's own, so spotgpu is the wheel's.
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")

    where = subprocess.run(
        [str(py), "-c", f"import spotgpu, {IMPORT_NAME}.templates as t; print(spotgpu.__file__); print(t.TEMPLATE_DIR)"],
        check=True, capture_output=True, text=True, env=_clean_env(), cwd=tmp_path,
    ).stdout.split()
    assert all(p.startswith(str(env_dir)) for p in where), where
    assert (Path(where[1]) / "Pulumi.yaml").exists()

    project = tmp_path / "my-stack"
    for rel, body in readme_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    shutil.copy(REPO / "stacks" / "Pulumi.dev.yaml", project / "Pulumi.dev.yaml")
    shutil.copy(REPO / "policy-config.json", project / "policy-config.json")
    run = subprocess.run(
        [str(env_dir / "bin" / "spotgpu"), "preview", "--program", str(project), "--stack", "dev", "--json"],
        capture_output=True, text=True, timeout=240, env=_clean_env(), cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert set(doc["economics"]["pools"]) == {"dev-aws", "dev-gcp", "dev-az"}
    assert doc["policy"]["violations"] is not None
    # The pack that judged it is the installed one, not this checkout's.
    pack = subprocess.run(
        [str(py), "-c", f"from {IMPORT_NAME}.offline.pack import default_policy_pack; print(default_policy_pack())"],
        check=True, capture_output=True, text=True, env=_clean_env(), cwd=tmp_path,
    ).stdout.strip()
    assert pack.startswith(str(env_dir)) and pack.endswith("share/spotgpu/policy-pack"), pack
    # The README's other route, from the wheel alone: `spotgpu init --wheel` then a preview from inside.
    made = subprocess.run(
        [str(env_dir / "bin" / "spotgpu"), "init", "made", "--owner", "vision-team", "--clouds", "aws", "--wheel", str(wheel)],
        capture_output=True, text=True, timeout=120, env=_clean_env(), cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    assert f"spotgpu[pulumi] @ {wheel.as_uri()}" in (tmp_path / "made" / "requirements.txt").read_text()
    inside = subprocess.run(
        [str(env_dir / "bin" / "spotgpu"), "preview", "--stack", "dev", "--json"],
        capture_output=True, text=True, timeout=240, env=_clean_env(), cwd=tmp_path / "made",
    )
    assert inside.returncode == 0, inside.stderr
    made_doc = json.loads(inside.stdout)
    assert made_doc["project"] == "made" and set(made_doc["outputs"]) == {"dev-aws"}
    assert not [v for v in made_doc["policy"]["violations"] if v["level"] == "mandatory"]
    dashboard = subprocess.run([str(env_dir / "bin" / "spotgpu"), "observability", "dashboard"],
                               capture_output=True, text=True, timeout=60, env=_clean_env(), cwd=tmp_path)  # fmt: skip
    assert dashboard.returncode == 0 and json.loads(dashboard.stdout)["uid"] == "spotgpu-overview", dashboard.stderr
