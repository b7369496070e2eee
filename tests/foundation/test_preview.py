"""``spotgpu preview`` runs the real stack program offline, as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPOTGPU = [sys.executable, "-m", "spotgpu"]


def _preview(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SPOTGPU, "preview", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def prod_doc() -> dict:
    run = _preview("--stack", "prod", "--json")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_prod_document_shape(prod_doc: dict) -> None:
    assert prod_doc["stack"] == "prod"
    assert set(prod_doc) >= {"stack", "resources", "policy", "economics"}
    for r in prod_doc["resources"]:
        assert set(r) >= {"urn", "type", "name", "parent", "inputs"}
    assert prod_doc["policy"]["violations"] is not None
    assert not [v for v in prod_doc["policy"]["violations"] if v["level"] == "mandatory"]


def test_prod_has_a_full_tree_per_cloud(prod_doc: dict) -> None:
    resources = prod_doc["resources"]
    urns = {r["urn"] for r in resources}
    for cloud, provider_prefix in (("aws", "aws:"), ("gcp", "gcp:"), ("azure", "azure-native:")):
        pools = [r for r in resources if r["type"] == f"spotgpu:{cloud}:GpuPool"]
        assert len(pools) == 1, cloud
        cloud_resources = [r for r in resources if r["type"].startswith(provider_prefix)]
        assert len(cloud_resources) >= 5, f"{cloud}: only {len(cloud_resources)} cloud resources"
        # Every cloud resource hangs under a spotgpu component of its own cloud.
        for r in cloud_resources:
            assert r["parent"] in urns and f"spotgpu:{cloud}:" in r["parent"], r["urn"]


def test_prod_inputs_are_in_wire_form(prod_doc: dict) -> None:
    keys: set[str] = set()
    for r in prod_doc["resources"]:
        keys.update(r["inputs"])
    assert not [k for k in keys if "_" in k and not k.startswith("__")], "inputs must be camelCase"


def test_prod_economics_cover_every_pool(prod_doc: dict) -> None:
    pools = prod_doc["economics"]["pools"]
    assert set(pools) == {"train-aws", "train-gcp", "train-az"}
    for pool in pools.values():
        assert pool["checkpointIntervalSeconds"] > 0


def test_dev_text_output() -> None:
    run = _preview("--stack", "dev")
    assert run.returncode == 0, run.stderr
    for heading in ("AWS:", "Google Cloud:", "Azure:", "Policy verdicts:", "Economics per pool:"):
        assert heading in run.stdout
    assert "spotgpu:aws:GpuPool" in run.stdout


def _copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", project)
    shutil.copytree(REPO / "stacks", project / "stacks")
    return project


def test_bad_config_fails_with_one_line(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    stack = project / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("zones: [us-central1-a, us-central1-b]", "zones: us-central1-a"))
    run = _preview("--program", str(project), "--stack", "dev", "--no-policy")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "spotgpu:pools[dev-gcp].zones" in lines[0] and "us-central1-a" in lines[0] and "fix:" in lines[0]


def test_unknown_stack_names_the_known_ones() -> None:
    run = _preview("--stack", "staging", "--no-policy")
    assert run.returncode == 2
    assert "fix: use one of dev, prod" in run.stderr


def test_any_pulumi_program(tmp_path: Path) -> None:
    """A team's own program, with no spotgpu config at all, previews too."""
    project = tmp_path / "raw"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: raw\nruntime: python\n")
    (project / "Pulumi.test.yaml").write_text("config:\n  aws:region: us-west-2\n  raw:bucketName: ckpt-raw\n")
    (project / "__main__.py").write_text(
        "import pulumi, pulumi_aws as aws\n"
        "b = aws.s3.Bucket('ckpt', bucket=pulumi.Config().require('bucketName'))\n"
        "pulumi.export('bucket', b.bucket)\n"
    )
    run = _preview("--program", str(project), "--stack", "test", "--no-policy", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    buckets = [r for r in doc["resources"] if r["type"] == "aws:s3/bucket:Bucket"]
    assert buckets[0]["inputs"]["bucket"] == "ckpt-raw"
    assert doc["economics"] == {}
