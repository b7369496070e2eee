"""A pool's own spot price (issue 23, item 3): pools sharing a workload rarely see one spot price.
``pools[P].spotPerHour`` prices that pool alone, in the preview, ``cost --stack`` and the workload
tag the policy pack's advisory rule reads; the workload's figure stays the default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_pool_economics import _cli, _project


def _aws_spot(price: float) -> Any:
    """train-aws at its own spot price; the other pools at the workload's (2.2)."""
    def edit(config: dict[str, Any]) -> None:
        for pool in config["spotgpu:pools"][1:]:
            pool.pop("spotPerHour", None)
        config["spotgpu:pools"][0]["spotPerHour"] = price
    return edit


def test_a_pool_spot_price_prices_that_pool_only(tmp_path: Path) -> None:
    project = _project(tmp_path, "own", _aws_spot(3.1))
    docs = {}
    for pool in ("train-aws", "train-gcp"):
        done = _cli("cost", "--stack", "own", "--program", str(project), "--pool", pool, "--json")
        assert done.returncode == 0, done.stderr
        docs[pool] = json.loads(done.stdout)
    aws, gcp = docs["train-aws"]["prices"], docs["train-gcp"]["prices"]
    assert (aws["spotPerHour"], aws["spotSource"]) == (3.1, "pools[train-aws].spotPerHour")
    assert (gcp["spotPerHour"], gcp["spotSource"]) == (2.2, "workloads.llm-finetune.prices.spotPerHour")
    terms = {p: {t["name"]: t for t in docs[p]["effectiveCost"]["terms"]} for p in docs}
    assert terms["train-aws"]["spot_compute"]["inputs"]["spotPerHour"] == 3.1
    assert terms["train-gcp"]["spot_compute"]["inputs"]["spotPerHour"] == 2.2
    preview = _cli("preview", "--program", str(project), "--stack", "own", "--no-policy", "--json")
    assert preview.returncode == 0, preview.stderr
    workload_tags = {t["value"] for r in json.loads(preview.stdout)["resources"]
                     if r["type"] == "aws:autoscaling/group:Group"
                     for t in r["inputs"].get("tags") or [] if t["key"] == "spotgpu-workload"}  # fmt: skip
    assert workload_tags and all(";p=3.1;" in t for t in workload_tags), workload_tags  # what the advisory rule reads


def test_a_pool_spot_price_above_on_demand_is_one_line_at_the_pool(tmp_path: Path) -> None:
    project = _project(tmp_path, "dear", _aws_spot(9.0))
    done = _cli("cost", "--stack", "dear", "--program", str(project), "--pool", "train-aws")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "spotgpu:pools[train-aws].spotPerHour: is above the on-demand price 5.67 of pool train-aws" in done.stderr
