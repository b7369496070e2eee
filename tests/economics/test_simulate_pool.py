"""``simulate --stack S --pool P``: a pool replayed on its own topology (issue 23, item 4).

Defect: simulate gave the ladder every traced zone (8 others in 3 regions), so a two-zone
pool looked as safe as a nine-zone one; and ``--plot`` showed only the baselines and wrote
a file named after the group, not the file asked for."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_pool_economics import _project

from spotgpu.catalogue.names import region_of
from spotgpu.economics.topology import map_pool_zones

REPO = Path(__file__).resolve().parents[2]
GROUP = "1-node/aws-02-15-2023"  # us-east-1 a c d f, us-east-2 a b, us-west-2 a b c
TRACED = ["us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f", "us-east-2a", "us-east-2b",
          "us-west-2a", "us-west-2b", "us-west-2c"]  # fmt: skip


def test_regions_of_each_clouds_zone_names() -> None:
    assert [region_of(z) for z in ("us-east-1a", "us-central1-a", "1")] == ["us-east-1", "us-central1", ""]
    # one rule for every caller (the fit's, the topology's and the agent's used to differ)
    assert [region_of(z) for z in ("us-gov-west-1a", "europe-west4-b", "eastus", "")] == ["us-gov-west-1", "europe-west4", "", ""]


def test_same_zones_first_then_stand_ins_from_the_pools_region() -> None:
    m = map_pool_zones("p", "us-east-1", ["us-east-1b", "us-east-1c"], ["g5.12xlarge"], TRACED)
    assert m.trace_zones == ["us-east-1a", "us-east-1c"]  # 1b is not traced: the first free candidate
    assert m.how == {"us-east-1b": "stand-in", "us-east-1c": "same zone"} and not m.unmapped
    assert m.lines() == ["topology of pool p: zones us-east-1b -> us-east-1a (stand-in), us-east-1c -> us-east-1c (same zone)"]


def test_another_clouds_pool_takes_the_traced_region_with_most_zones_and_says_what_is_left() -> None:
    m = map_pool_zones("g", "us-central1", ["us-central1-a", "us-central1-b"], ["a2-highgpu-1g", "g2-standard-8"], TRACED)
    assert m.trace_zones == ["us-east-1a", "us-east-1c"]
    az = map_pool_zones("z", "eastus", ["1", "2", "3", "4", "5"], ["Standard_NC24ads_A100_v4"], TRACED)
    assert az.trace_zones == ["us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f"] and az.unmapped == ("5",)
    assert "not replayed (no traced zone left): 5" in "\n".join(az.lines())
    assert "alternate_sku rung has no group here" in "\n".join(m.lines())


def _two_zones(config: dict[str, Any]) -> None:
    config["spotgpu:pools"][0]["subnets"] = config["spotgpu:pools"][0]["subnets"][:2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spotgpu", *args], capture_output=True, text=True, timeout=240,
                          cwd=REPO)  # fmt: skip


@pytest.mark.timeout(300)
def test_a_two_zone_pool_is_replayed_on_two_zones(tmp_path: Path) -> None:
    project = _project(tmp_path, "two", _two_zones)
    done = _cli("simulate", "--stack", "two", "--program", str(project), "--pool", "train-aws", "--trace-group", GROUP,
                "--nodes", "1", "--max-starts", "2", "--start-every-hours", "240", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    group = json.loads(done.stdout)["groups"][0]
    assert group["zones"] == ["us-east-1a", "us-east-1c"] == group["topology"]["traceZones"]
    assert [m["how"] for m in group["topology"]["mapping"]] == ["same zone", "stand-in"]
    assert {r["policy"] for r in group["rows"]} >= {"spotgpu ladder", "on-demand only"}
    assert group["rows"][0]["jobs"] == 4  # 2 starts x the pool's 2 zones as home, not x 9 traced zones
    text = _cli("simulate", "--stack", "two", "--program", str(project), "--pool", "train-aws", "--trace-group", GROUP,
                "--nodes", "1", "--max-starts", "1", "--start-every-hours", "240")  # fmt: skip
    assert text.returncode == 0 and "us-east-1b -> us-east-1c (stand-in)" in text.stdout


@pytest.mark.timeout(300)
def test_plot_writes_the_named_file_with_the_ladder_for_every_group(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = REPO / "tests" / "economics" / "data"
    out = tmp_path / "plots" / "ladder.png"
    groups = ["--trace-group", GROUP, "--trace-group", "16-node/aws-08-27-2023"]
    done = _cli("simulate", "--profile", str(data / "llm-finetune.yaml"), "--ladder", str(data / "training-ladder.yaml"),
                *groups, "--nodes", "1", "--max-starts", "1", "--start-every-hours", "240", "--plot", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stderr
    assert [p.name for p in out.parent.iterdir()] == ["ladder.png"] and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_pool_the_stack_does_not_have_is_one_line_exit_2() -> None:
    done = _cli("simulate", "--stack", "prod", "--pool", "nope")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "'nope' is not a pool of stack prod; use one of train-aws, train-gcp, train-az" in done.stderr
    both = _cli("simulate", "--stack", "prod", "--pool", "train-aws", "--profile", "x.yaml")
    assert both.returncode == 2 and "leave out --profile and --ladder" in both.stderr


def test_the_docs_recipe_prints_the_documented_mapping() -> None:
    """docs/economics.md "Simulate a pool": the command block run exactly as written, from the repo."""
    import shlex

    doc = (REPO / "docs" / "economics.md").read_text()
    section = doc[doc.index("### Simulate a pool"):]
    command = section.split("```bash\n", 1)[1].split("\n```", 1)[0]
    printed = section.split("prints, before its table", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    argv = shlex.split(command)
    assert argv[0] == "spotgpu"
    done = _cli(*argv[1:])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(printed)
    assert ": 6 jobs (" in done.stdout
