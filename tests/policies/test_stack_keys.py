"""The review a platform team does (issue 31, item 7, the policy part).

Defects: a GCP pool with a 0 s notice failed the policy pack with a fix in raw-resource terms
(``scheduling.preemption_notice_duration``), not the stack key its owner edits
(``pools[dev-gcp].notice.preemptionNoticeSeconds``); once waived, the preview said "no
violations" and showed no waiver in force.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from spotgpu_guard.inventory import Res
from spotgpu_guard.links import Links
from spotgpu_guard.stack_keys import made_by_component, restate

REPO = Path(__file__).resolve().parents[2]
WAIVER = "batch eval: a restart costs under a minute"


def project_with_zero_notice(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    project.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", project)
    shutil.copytree(REPO / "stacks", project / "stacks")
    stack = project / "stacks" / "Pulumi.dev.yaml"
    doc = yaml.safe_load(stack.read_text())
    pools = doc["config"]["spotgpu:pools"]
    next(p for p in pools if p["name"] == "dev-gcp")["notice"] = {"provider": "gcp", "preemptionNoticeSeconds": 0}
    next(p for p in pools if p["name"] == "dev-aws")["optOut"] = {"catalogue": "g6 types launched after the catalogue"}
    stack.write_text(yaml.safe_dump(doc))
    return project


def preview(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", "preview", "--program", str(project), "--stack", "dev", *args],
                          capture_output=True, text=True, timeout=240)  # fmt: skip


@pytest.mark.timeout(600)
def test_a_component_pool_is_told_its_stack_key_and_a_waiver_in_force_is_listed(tmp_path: Path) -> None:
    project = project_with_zero_notice(tmp_path)
    failed = preview(project, "--json")
    assert failed.returncode == 1, failed.stderr
    notices = [v for v in json.loads(failed.stdout)["policy"]["violations"] if v["policy"] == "notice-handled"]
    assert notices and all(v["level"] == "mandatory" for v in notices)
    for v in notices:
        assert "fix: set pools[dev-gcp].notice.preemptionNoticeSeconds to 120" in v["message"], v["message"]
        assert "notice-handled.zeroNoticeWaivers.dev-gcp in policy-config.json" in v["message"]
        assert "scheduling.preemption_notice_duration" not in v["message"]

    config = json.loads((REPO / "policy-config.json").read_text())
    config["notice-handled"]["zeroNoticeWaivers"] = {"dev-gcp": WAIVER, "dev-gpc": "a typo names no pool at all"}
    (project / "policy-config.json").write_text(json.dumps(config))
    waived = preview(project)
    assert waived.returncode == 0, waived.stderr
    assert "no violations (3 waiver(s) in force, below)" in waived.stdout
    text = waived.stdout.split("Waivers in force", 1)[1]
    assert f"[policy config] notice-handled.zeroNoticeWaivers.dev-gcp: notice-handled: a 0 s GCP preemption notice: {WAIVER}" in text
    assert "zeroNoticeWaivers.dev-gpc: notice-handled: a 0 s GCP preemption notice (names no pool or resource" in text
    assert "[stack config] pools[dev-aws].optOut.catalogue:" in text
    doc = json.loads(preview(project, "--json").stdout)
    assert {w["key"] for w in doc["policy"]["waivers"]} == {
        "notice-handled.zeroNoticeWaivers.dev-gcp", "notice-handled.zeroNoticeWaivers.dev-gpc", "pools[dev-aws].optOut.catalogue",
    }


def res(urn: str) -> Res:
    return Res(type=urn.split("::")[2].split("$")[-1], urn=urn, name=urn.rsplit("::", 1)[1], props={})


def test_only_a_resource_under_a_spotgpu_component_is_restated() -> None:
    made = res("urn:pulumi:dev::p::spotgpu:gcp:GpuPool$gcp:compute/regionInstanceTemplate:RegionInstanceTemplate::t")
    raw = res("urn:pulumi:dev::p::gcp:compute/regionInstanceTemplate:RegionInstanceTemplate::t")
    under_own = res("urn:pulumi:dev::p::acme:Team$gcp:compute/regionInstanceTemplate:RegionInstanceTemplate::t")
    assert made_by_component(made) and not made_by_component(raw) and not made_by_component(under_own)
    links = Links({"spotgpu-pool": "dev-gcp"})
    message = "thing is wrong; fix: set scheduling.x"
    assert restate(message, made, links, "set {pool}.notice.y ({name})") == "thing is wrong; fix: set pools[dev-gcp].notice.y (dev-gcp)"
    assert restate(message, raw, links, "set {pool}.notice.y") == message
    assert restate(message, made, Links({}), "set {pool}.notice.y") == message  # no pool link: raw terms
