"""The ``pulumi new`` template yields a project shaped like ``stacks/`` that previews clean."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from package_fixtures import REPO

from spotgpu.config import ConfigError, select_clouds
from spotgpu_pulumi.offline.preview import run_preview, to_document
from spotgpu_pulumi.templates import TEMPLATE_DIR, render_template, template_prompts


def test_template_program_is_the_stacks_program() -> None:
    assert (TEMPLATE_DIR / "__main__.py").read_text() == (REPO / "stacks" / "__main__.py").read_text()
    assert (TEMPLATE_DIR / "policy-config.json").read_text() == (REPO / "policy-config.json").read_text()


def test_template_prompts_for_environment_owner_and_clouds() -> None:
    prompts = template_prompts()
    assert {"spotgpu:environment", "spotgpu:owner", "spotgpu:clouds"} <= set(prompts)
    assert "default" not in prompts["spotgpu:owner"]  # the team must say who owns it
    dev = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())["config"]
    project_config = yaml.safe_load((TEMPLATE_DIR / "Pulumi.yaml").read_text())["config"]
    for key in ("spotgpu:workloads", "spotgpu:ladders", "spotgpu:pools"):
        assert key not in prompts  # a prompt is a string: structured keys are project-level config instead
        assert project_config[key] == {"value": dev[key]}, key  # same shape as stacks/, structured YAML


@pytest.mark.parametrize(("clouds", "pools"), [("aws,gcp", {"dev-aws", "dev-gcp"}), ("aws,gcp,azure", {"dev-aws", "dev-gcp", "dev-az"})])
def test_rendered_template_previews_with_zero_mandatory_violations(tmp_path: Path, clouds: str, pools: set[str]) -> None:
    project = render_template(
        tmp_path / "gpu-pools",
        project="gpu-pools",
        description="Team GPU pools",
        stack="dev",
        answers={"spotgpu:owner": "vision-team", "spotgpu:clouds": clouds},
    )
    assert "${PROJECT}" not in (project / "Pulumi.yaml").read_text()
    assert sorted(p.name for p in project.iterdir()) == [
        ".gitignore", "Pulumi.dev.yaml", "Pulumi.yaml", "__main__.py", "policy-config.json", "requirements.txt",
    ]
    result = run_preview(project, "dev", REPO / "policies", project / "policy-config.json")
    doc = to_document(result)
    assert doc["project"] == "gpu-pools"
    assert {r["name"] for r in doc["resources"] if r["type"].endswith(":GpuPool")} == pools
    assert not result.mandatory, result.mandatory
    assert set(doc["outputs"]) == pools
    bucket = next(r for r in doc["resources"] if r["type"] == "aws:s3/bucket:Bucket")
    assert bucket["inputs"]["tags"]["spotgpu-owner"] == "vision-team"
    # The economics are the program's own config read (clouds selection included), for exactly these pools.
    assert set(doc["economics"]["pools"]) == pools


def test_clouds_prompt_rejects_unknown_clouds() -> None:
    assert select_clouds(None) is None and select_clouds('["gcp"]') == {"gcp"}
    with pytest.raises(ConfigError, match=r"spotgpu:clouds: .*fix: use a comma-separated subset of aws, gcp, azure"):
        select_clouds("aws,oci")
