"""Economics per pool: the pool's own types and region priced, and rungs that can act."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from spotgpu.catalogue import on_demand_price

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", *args], capture_output=True, text=True, timeout=180,
                          cwd=REPO)  # fmt: skip


def _project(tmp: Path, stack: str, edit: Any) -> Path:
    """A copy of the project whose ``stack`` is the prod stack after ``edit(config)``."""
    (tmp / "stacks").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Pulumi.yaml", tmp / "Pulumi.yaml")
    shutil.copy(REPO / "stacks/__main__.py", tmp / "stacks/__main__.py")
    doc = yaml.safe_load((REPO / "stacks/Pulumi.prod.yaml").read_text())
    edit(doc["config"])
    (tmp / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp


@pytest.mark.parametrize(
    ("cloud", "name", "region", "accelerator"),
    [
        *[("aws", t, "us-east-1", None) for t in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "g5.12xlarge",
                                                   "g6.12xlarge", "g6e.12xlarge")],
        *[("gcp", t, "us-central1", None) for t in ("a2-highgpu-8g", "a2-ultragpu-8g", "a3-highgpu-8g", "g2-standard-48")],
        ("gcp", "n1-standard-8", "us-central1", ("nvidia-tesla-t4", 1)),
        ("gcp", "n1-standard-8", "us-central1", ("nvidia-tesla-v100", 1)),
        *[("azure", t, "eastus", None) for t in ("Standard_NC24ads_A100_v4", "Standard_NC40ads_H100_v5",
                                                  "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5")],
    ],
)  # fmt: skip
def test_the_catalogue_prices_the_gpu_types_platform_teams_use(
    cloud: str, name: str, region: str, accelerator: tuple[str, int] | None
) -> None:
    """Defect: no price for p4d, p5, a3 or ND-series sizes, so leaving onDemandPerHour out failed."""
    from spotgpu.catalogue import price_provenance

    quote = on_demand_price(cloud, name, region, accelerator)
    assert quote is not None and quote.usd_per_hour > 0
    assert "20" in quote.source  # a date (a year) is always named
    entry = price_provenance(cloud, region, name)
    if entry is not None:
        assert entry["verified"] is False and "UNVERIFIED" in quote.source


def test_p5e_has_no_made_up_price_and_says_why() -> None:
    from spotgpu.catalogue import price_provenance

    assert on_demand_price("aws", "p5e.48xlarge", "us-east-1") is None
    assert "Capacity Blocks" in (price_provenance("aws", "us-east-1", "p5e.48xlarge") or {})["source"]


def _own_types(config: dict[str, Any]) -> None:
    """One workload, no typed on-demand price: each pool is priced from its own types."""
    config["spotgpu:workloads"]["llm-finetune"]["prices"].pop("onDemandPerHour", None)
    pools = config["spotgpu:pools"]
    pools[0]["instanceTypes"] = ["p4d.24xlarge", "p4de.24xlarge"]
    pools[1]["machineTypes"] = [{"machineType": "a2-highgpu-8g"}, {"machineType": "a2-ultragpu-8g"}]
    del pools[2]
    # the tiered workload's templates request Local SSDs: a2-ultragpu-8g (8) gets a MIG apart from
    # a2-highgpu-8g (none), which only an alternate_sku rung grows
    steps = config["spotgpu:ladders"]["training-gcp"]["steps"]
    steps.insert(2, {"kind": "alternate_sku", "maxWaitSeconds": 1200, "costCeilingPerHour": 20})
    for ladder in ("training-aws", "training-gcp"):
        steps = config["spotgpu:ladders"][ladder]["steps"]
        next(s for s in steps if s["kind"] == "on_demand")["costCeilingPerHour"] = 60.0


def test_pools_sharing_a_workload_are_priced_by_their_own_types(tmp_path: Path) -> None:
    """Defect: an AWS p4d pool and a GCP a2 pool sharing one workload got identical economics."""
    project = _project(tmp_path, "own", _own_types)
    docs = {}
    for pool in ("train-aws", "train-gcp"):
        done = _cli("cost", "--stack", "own", "--program", str(project), "--pool", pool, "--json")
        assert done.returncode == 0, done.stderr
        docs[pool] = json.loads(done.stdout)
    aws, gcp = docs["train-aws"], docs["train-gcp"]
    # each pool's on-demand is the list price of its fallback group's first type (what its ranked, prioritized
    # allocation launches first); the on_demand rung's ceiling is still judged against the dearest it may grow
    assert aws["prices"]["onDemandPerHour"] == 32.77 and "p4d.24xlarge: the fallback group's first type" in aws[
        "prices"]["onDemandSource"]  # fmt: skip
    assert gcp["prices"]["onDemandPerHour"] == 29.39 and "p4d" not in gcp["prices"]["onDemandSource"]
    assert aws["onDemandTotalUsd"] == round(36 * 2 * 32.77, 2) and gcp["onDemandTotalUsd"] == round(36 * 2 * 29.39, 2)
    assert aws["spotTotalUsd"] != gcp["spotTotalUsd"]
    assert "UNVERIFIED" in aws["prices"]["onDemandSource"]


def _one_zone(reason: str | None) -> Any:
    def edit(config: dict[str, Any]) -> None:
        aws = config["spotgpu:pools"][0]
        aws["subnets"] = aws["subnets"][:1]
        aws["optOut"] = {"singleZone": "a placement group pins the gang to one zone"}
        if reason:
            aws["optOut"]["idleRungs"] = reason
    return edit


def test_a_rung_without_a_group_fails_validation(tmp_path: Path) -> None:
    """Defect: alternate_zone on a one-zone pool only added its wait, and nothing warned."""
    project = _project(tmp_path, "onezone", _one_zone(None))
    for args in (("cost", "--stack", "onezone", "--program", str(project), "--pool", "train-aws"),
                 ("preview", "--program", str(project), "--stack", "onezone", "--no-policy")):  # fmt: skip
        done = _cli(*args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "steps[1].kind" in done.stderr and "alternate_zone" in done.stderr
        assert "optOut.idleRungs" in done.stderr


def test_a_stated_reason_turns_the_error_into_a_warning_in_the_preview(tmp_path: Path) -> None:
    project = _project(tmp_path, "stated", _one_zone("the zone is reserved; the rung is kept for later"))
    done = _cli("preview", "--program", str(project), "--stack", "stated", "--no-policy")
    assert done.returncode == 0, done.stderr
    assert "WARNING: ladder training-aws steps[1]: alternate_zone needs a second zone and the pool has 1" in done.stdout
