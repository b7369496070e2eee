"""The GPU catalogue: in sync with the installed SDKs, sourced and dated, and useful to the models."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from spotgpu import catalogue

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "spotgpu" / "catalogue" / "data"


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_catalogue_aws", REPO / "tools" / "gen_catalogue_aws.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_aws_catalogue_is_in_sync_with_the_installed_botocore_and_moto() -> None:
    committed = json.loads((DATA / "aws.json").read_text())
    committed.pop("generated")
    fresh = _generator().build()
    assert committed == fresh, "spotgpu/catalogue/data/aws.json is stale: run python tools/gen_catalogue_aws.py"


def test_aws_gpu_types_are_names_pulumi_aws_accepts_too() -> None:
    enum = pytest.importorskip("pulumi_aws.ec2").InstanceType
    pulumi_names = {t.value for t in enum}
    # pulumi_aws's enum lags botocore's; every GPU type it has must be one the catalogue knows.
    gpu_in_pulumi = {n for n in pulumi_names if catalogue.aws_gpu(n) is not None}
    assert {"g5.xlarge", "g6.xlarge", "p5.48xlarge"} <= gpu_in_pulumi
    assert pulumi_names - catalogue.aws_instance_types() == set()


@pytest.mark.parametrize("name", ["aws", "gcp", "azure", "prices"])
def test_every_data_file_names_its_source_and_date(name: str) -> None:
    doc = json.loads((DATA / f"{name}.json").read_text())
    text = json.dumps(doc)
    assert ("source" in doc or "note" in doc) and len(text) > 100
    assert "generated" in doc or "asOf" in doc


def test_shapes_carry_gpu_model_count_memory_and_regions() -> None:
    g5 = catalogue.aws_gpu("g5.12xlarge")
    assert g5 is not None and (g5.gpu_model, g5.gpu_count) == ("A10G", 4) and 22 <= g5.gpu_memory_gib <= 24
    assert g5.regions is not None and "us-east-1" in g5.regions
    assert catalogue.aws_gpu("m5.large") is None and "m5.large" in catalogue.aws_instance_types()
    a2 = catalogue.gcp_machine("a2-highgpu-4g")
    assert a2 is not None and (a2.gpu_model, a2.gpu_count) == ("A100 40GB", 4)
    assert catalogue.gcp_is_n1("n1-standard-8") and catalogue.gcp_machine("n1-standard-8") is None
    h100 = catalogue.azure_size("Standard_NC40ads_H100_v5")
    assert h100 is not None and h100.gpu_model == "H100 NVL" and h100.describe() == "1 x H100 NVL (94 GiB each)"


def test_closest_matches_and_prices_with_their_source() -> None:
    assert catalogue.closest("us-central9", catalogue.gcp_regions())[0] == "us-central1"
    assert catalogue.closest("standard_nc24ads_a100_v4", catalogue.azure_sizes())[0] == "Standard_NC24ads_A100_v4"
    quote = catalogue.on_demand_price("aws", "g5.xlarge", "us-east-1")
    assert quote is not None and quote.usd_per_hour == pytest.approx(1.006) and "prices.json" in quote.source
    n1 = catalogue.on_demand_price("gcp", "n1-standard-8", "us-central1", ("nvidia-tesla-t4", 1))
    assert n1 is not None and n1.usd_per_hour == pytest.approx(8 * 0.0475 + 0.35, abs=0.01)
    assert catalogue.on_demand_price("aws", "g5.xlarge", "eu-west-1") is None  # no figure: no guess


def test_preview_economics_say_where_each_price_came_from() -> None:
    from spotgpu.config import parse_stack_config, read_stack_file
    from spotgpu.economics.report import render_economics, stack_economics

    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.dev.yaml"))
    raw["workloads"]["smoke-train"]["prices"].pop("onDemandPerHour", None)
    report = stack_economics(parse_stack_config(raw))
    aws = report["pools"]["dev-aws"]["prices"]
    assert aws["onDemandPerHour"] == pytest.approx(1.006)
    assert aws["onDemandSource"].startswith("catalogue list price for us-east-1")
    assert aws["spotSource"] == "pools[dev-aws].spotPerHour"
    figures = report["pools"]["dev-aws"]["figures"]
    assert figures["prices"]["onDemandPerHour"]["kind"] == "catalogue"
    assert figures["prices"]["spotPerHour"] == {"value": 0.45, "kind": "typed", "from": "pools[dev-aws].spotPerHour"}
    text = render_economics(report)
    assert "on-demand $1.006/h (catalogue list price for us-east-1" in text
