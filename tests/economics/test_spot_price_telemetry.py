"""Spot price from telemetry (issue 23, item 3): the price exports platform teams have (AWS
``describe-spot-price-history``, Azure's Retail Prices API) and v1 ``spot_price`` records become one
schema record; the fit gives each SKU's median, and ``--sku`` makes one the profile's ``prices.spotPerHour``.

The documents are built here as the tools print them (field names from botocore's EC2 service
model and the Retail Prices API's documented response); nothing touches the network."""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_pool_economics import _cli

from spotgpu.cliutil import non_camel_keys
from spotgpu.economics.fit import FitAccumulator
from spotgpu.economics.telemetry import ReadStats, TelemetryRecord, parse_lines
from spotgpu.economics.telemetry_files import detect_format, read_files

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "tests" / "economics" / "data" / "llm-finetune.yaml"

#: g5.12xlarge's Linux spot price in three us-east-1 zones, one change a day for five days.
G5 = {
    "us-east-1a": [2.0345, 2.0512, 1.9876, 2.1003, 2.0811],
    "us-east-1b": [1.8123, 1.8456, 1.8234, 1.8799, 1.8650],
    "us-east-1c": [2.4567, 2.3988, 2.4102, 2.5011, 2.4470],
}
G5_MEDIAN = statistics.median(p for prices in G5.values() for p in prices)  # 15 prices: the middle one


def _aws_row(zone: str, sku: str, price: str, day: int, product: str = "Linux/UNIX") -> dict[str, Any]:
    """One item as `aws ec2 describe-spot-price-history --output json` prints it (SpotPrice a string)."""
    return {"AvailabilityZone": zone, "AvailabilityZoneId": f"use1-az{ord(zone[-1]) - 96}", "InstanceType": sku,
            "ProductDescription": product, "SpotPrice": price,
            "Timestamp": f"2026-04-{day:02d}T{6 + day:02d}:14:07+00:00"}  # fmt: skip


def aws_history() -> dict[str, Any]:
    rows = [_aws_row(z, "g5.12xlarge", f"{p:.6f}", d + 1) for z, prices in G5.items() for d, p in enumerate(prices)]
    rows += [_aws_row(z, "g5.12xlarge", f"{prices[0] + 2.208:.6f}", 1, "Windows") for z, prices in G5.items()]
    rows += [_aws_row("us-east-1a", "g6.12xlarge", "1.714300", 2), _aws_row("us-east-1b", "g6.12xlarge", "1.698800", 4)]
    rows.append({**rows[0], "ProductDescription": "Linux/UNIX (Amazon VPC)"})  # the same price, listed twice
    return {"SpotPriceHistory": sorted(rows, key=lambda r: r["Timestamp"], reverse=True), "NextToken": ""}  # newest first


def _azure_item(sku: str, region: str, price: float, *, spot: bool = True, windows: bool = False,
                kind: str = "Consumption", unit: str = "1 Hour", tier: str = "") -> dict[str, Any]:  # fmt: skip
    """One item of a Retail Prices API page (https://prices.azure.com/api/retail/prices)."""
    name = sku.removeprefix("Standard_").replace("_", " ")
    suffix = " Spot" if spot else tier
    return {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": price, "unitPrice": price,
            "armRegionName": region, "location": {"eastus": "US East", "westus2": "US West 2"}[region],
            "effectiveStartDate": "2026-03-01T00:00:00Z", "meterId": "9e1b4c36-0000-4a3c-8c11-5d4ad0d3f4a2",
            "meterName": f"{name}{suffix}", "productId": "DZH318Z08M22", "skuId": "DZH318Z08M22/00RF",
            "productName": f"Virtual Machines NCadsA100v4 Series{' Windows' if windows else ''}",
            "skuName": f"{name}{suffix}", "serviceName": "Virtual Machines", "serviceId": "DZH313Z7MMC8",
            "serviceFamily": "Compute", "unitOfMeasure": unit, "type": kind, "isPrimaryMeterRegion": True,
            "armSkuName": sku}  # fmt: skip


def azure_page(next_page: str | None = None) -> dict[str, Any]:
    nc24, nc48 = "Standard_NC24ads_A100_v4", "Standard_NC48ads_A100_v4"
    items = [
        _azure_item(nc24, "eastus", 0.7345),
        _azure_item(nc24, "eastus", 0.9185, windows=True),
        _azure_item(nc24, "eastus", 3.673, spot=False),
        _azure_item(nc24, "eastus", 0.7346, spot=False, tier=" Low Priority"),
        _azure_item(nc24, "eastus", 0.5876, kind="DevTestConsumption"),
        _azure_item(nc24, "eastus", 19_305.0, spot=False, kind="Reservation", unit="1 Year"),
        _azure_item(nc24, "westus2", 0.8012),
        _azure_item(nc48, "eastus", 1.469),
    ]
    return {"BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail", "Items": items,
            "NextPageLink": next_page, "Count": len(items)}  # fmt: skip


def _write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


# --- readers ---------------------------------------------------------------------------------------


def test_the_aws_history_is_detected_and_read_linux_only(tmp_path: Path) -> None:
    path = _write(tmp_path / "aws-spot-prices.json", aws_history())
    assert detect_format(path) == "aws-spot-prices"
    stats = ReadStats()
    records = list(read_files([path], stats=stats))
    assert {r.event for r in records} == {"spot_price"} and len(records) == 17
    assert stats.skipped == {"aws-spot-prices:Windows": 3, "aws-spot-prices:duplicate": 1}
    first = next(r for r in records if r.zone == "us-east-1a" and r.sku == "g5.12xlarge" and r.usd_per_hour == 2.0345)
    assert (first.pool, first.provider, first.ts) == (None, "aws", _epoch("2026-04-01T07:14:07+00:00"))
    forced = list(read_files([path], fmt="aws-spot-prices"))
    assert forced == records


def test_the_azure_page_is_detected_and_read_spot_linux_consumption_only(tmp_path: Path) -> None:
    path = _write(tmp_path / "azure-retail-prices.json", azure_page(next_page="https://prices.azure.com/api/retail/"
                                                                                "prices?$skip=100"))  # fmt: skip
    assert detect_format(path) == "azure-retail-prices"
    stats = ReadStats()
    records = list(read_files([path], fmt="azure-retail-prices", stats=stats))
    assert [(r.sku, r.zone, r.usd_per_hour, r.provider) for r in records] == [
        ("Standard_NC24ads_A100_v4", "eastus", 0.7345, "azure"),
        ("Standard_NC24ads_A100_v4", "westus2", 0.8012, "azure"),
        ("Standard_NC48ads_A100_v4", "eastus", 1.469, "azure"),
    ]
    assert stats.skipped == {"azure-retail-prices:Windows": 1, "azure-retail-prices:not Spot": 3,
                             "azure-retail-prices:DevTestConsumption price": 1}  # fmt: skip
    assert len(stats.notes) == 1 and "NextPageLink" in stats.notes[0] and str(path) in stats.notes[0]


def test_a_v1_spot_price_needs_no_pool_but_every_other_record_does() -> None:
    line = {"v": 1, "ts": 1775000000, "event": "spot_price", "sku": "g5.12xlarge", "zone": "us-east-1a",
            "usdPerHour": 2.03}  # fmt: skip
    (record,) = parse_lines([json.dumps(line)])
    assert record.pool is None and record.usd_per_hour == 2.03
    for bad, needle in (({**line, "event": "notice"}, "pool: Value error, Field required"),
                        ({k: v for k, v in line.items() if k != "usdPerHour"}, "usdPerHour: Value error, a spot_price "
                                                                              "record needs its usdPerHour"),
                        ({k: v for k, v in line.items() if k != "sku"}, "needs its sku"),
                        ({**line, "event": "notice", "pool": "p"}, "only a spot_price record carries usdPerHour")):  # fmt: skip
        with pytest.raises(ValueError, match=r"x\.jsonl:1: ") as err:
            list(parse_lines([json.dumps(bad)], "x.jsonl"))
        assert needle in str(err.value), err.value


# --- bad input: one line, exit 2 ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "doc", "needle"),
    [
        ("aws-windows.json", {"SpotPriceHistory": [_aws_row("us-east-1a", "g5.12xlarge", "4.2", 1, "Windows")]},
         "no usable spot price in it (1 Windows); fix: export Linux prices: aws ec2 describe-spot-price-history "
         "--product-descriptions Linux/UNIX"),
        ("aws-empty.json", {"SpotPriceHistory": []}, "no usable spot price in it (no items)"),
        ("azure-pay-as-you-go.json", {"Items": [_azure_item("Standard_NC24ads_A100_v4", "eastus", 3.673, spot=False)]},
         "no usable spot price in it (1 not Spot); fix: export Spot Linux prices: $filter=serviceName eq"),
    ],
)  # fmt: skip
def test_a_price_document_with_no_usable_item_is_one_line_exit_2(tmp_path: Path, name: str, doc: Any, needle: str) -> None:
    path = _write(tmp_path / name, doc)
    done = _cli("profile", "fit", "--telemetry", str(path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"spotgpu profile fit: {path}: {needle}" in done.stderr


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("cents.json", json.dumps({"SpotPriceHistory": [_aws_row("us-east-1b", "g5.12xlarge", "203.450000", 1)]}),
         "cents.json SpotPriceHistory[0].SpotPrice '203.450000': 203.45 USD per VM-hour is 36x the on-demand list "
         "price 5.67/h of g5.12xlarge, above the plausible 10x: cents or a monthly price typed as USD per hour?; "
         "fix: write the spot USD per VM-hour, e.g. 2.0345 if it is in cents"),
        ("unlisted.json", json.dumps({"Items": [_azure_item("Standard_ND96isr_H200_v5", "eastus", 734.5)]}),
         "unlisted.json Items[0].retailPrice 734.5: 734.5 USD per VM-hour is above the plausible 200 for any GPU VM "
         "(the catalogue lists no price of Standard_ND96isr_H200_v5)"),
        ("text.json", json.dumps({"SpotPriceHistory": [_aws_row("us-east-1b", "g5.12xlarge", "n/a", 1)]}),
         "text.json SpotPriceHistory[0].SpotPrice 'n/a': Input should be a valid number"),
        ("euro.json", json.dumps({"Items": [{**_azure_item("Standard_NC24ads_A100_v4", "eastus", 0.68),
                                             "currencyCode": "EUR"}]}),
         "euro.json Items[0].currencyCode 'EUR': the cost model is in USD; fix: fetch the prices without currencyCode"),
        ("monthly.jsonl", json.dumps({"v": 1, "ts": 1775000000, "event": "spot_price", "sku": "g5.12xlarge",
                                      "zone": "us-east-1a", "usdPerHour": 1485.2}),
         "monthly.jsonl:1: usdPerHour: Value error, 1485.2 USD per VM-hour is 262x the on-demand list price 5.67/h"),
    ],
)  # fmt: skip
def test_an_implausible_or_foreign_price_is_one_line_naming_file_item_value_and_fix(
    tmp_path: Path, name: str, content: str, needle: str
) -> None:
    path = tmp_path / name
    path.write_text(content + "\n")
    done = _cli("profile", "fit", "--telemetry", str(path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert needle in done.stderr and str(tmp_path) in done.stderr, done.stderr


# --- the fit ---------------------------------------------------------------------------------------


def test_the_fit_gives_each_skus_median_min_max_samples_and_zones(tmp_path: Path) -> None:
    aws = _write(tmp_path / "aws.json", aws_history())
    azure = _write(tmp_path / "azure.json", azure_page())
    fleet = [TelemetryRecord.model_validate(x) for x in (
        {"ts": 100, "event": "node_started", "pool": "p", "node": "a", "capacity": "spot", "provider": "gcp"},
        {"ts": 200, "event": "spot_price", "pool": "other", "sku": "g5.12xlarge", "usdPerHour": 0.5},
    )]  # fmt: skip
    acc = FitAccumulator(pool="p").add_all([*read_files([aws, azure]), *fleet])
    assert (acc.last_ts, acc.providers) == (100, {"gcp"})  # prices move neither the end of the logs nor the notice
    fit = acc.result()
    g5 = fit.spot_prices["g5.12xlarge"]  # the other pool's 0.5 is not in it
    assert (len(g5.prices), g5.median, g5.prices[0], g5.prices[-1]) == (15, G5_MEDIAN, 1.8123, 2.5011)
    doc = {c["sku"]: c for c in fit.to_dict()["spotPrices"]["skus"]}
    assert doc["g5.12xlarge"] == {
        "sku": "g5.12xlarge", "providers": ["aws"], "samples": 15, "medianUsdPerHour": G5_MEDIAN,
        "minUsdPerHour": 1.8123, "maxUsdPerHour": 2.5011, "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
        "window": ["2026-04-01T07:14:07Z", "2026-04-05T11:14:07Z"], "onDemandListUsdPerHour": 5.67,
    }  # fmt: skip
    assert doc["g6.12xlarge"]["note"].startswith("few samples (2)")
    assert "prices from 2 regions (eastus, westus2): the median mixes them" in doc["Standard_NC24ads_A100_v4"]["note"]
    updates, why = fit.profile_updates()
    assert "prices.spotPerHour" not in updates and "pass --sku NAME (priced: Standard_NC24ads_A100_v4, " in why[
        "prices.spotPerHour"]  # fmt: skip
    chosen = acc.result(price_sku="g5.12xlarge")
    assert chosen.profile_updates()[0]["prices.spotPerHour"] == G5_MEDIAN
    assert chosen.to_dict()["spotPrices"]["applied"]["sku"] == "g5.12xlarge"


def test_no_price_in_the_telemetry_is_said() -> None:
    fit = FitAccumulator().result()
    assert fit.profile_updates()[1]["prices.spotPerHour"].startswith("too little data: no spot price in the telemetry")
    assert fit.to_dict()["spotPrices"] == {"skus": [], "applied": None, "note": fit.spot_price()[1]}


# --- profile fit --sku --out, cost --telemetry --sku --------------------------------------------------


def test_profile_fit_sku_writes_the_median_into_out_and_without_it_says_how(tmp_path: Path) -> None:
    aws = _write(tmp_path / "aws.json", aws_history())
    out = tmp_path / "measured.yaml"
    done = _cli("profile", "fit", "--telemetry", str(aws), "--profile", str(BASE), "--sku", "g5.12xlarge",
                "--out", str(out), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    prices = yaml.safe_load(out.read_text())["prices"]
    assert prices == {**yaml.safe_load(BASE.read_text())["prices"], "spotPerHour": G5_MEDIAN, "storagePerGbMonth": 0.023,
                      "requestPer1000": 0.005}  # the base's on-demand and penalty stay  # fmt: skip
    doc = json.loads(done.stdout)
    assert non_camel_keys(doc, names_under=["skipped"]) == []  # the skipped kinds are names, not keys
    assert doc["measuredProfile"] == {"prices": {"spotPerHour": G5_MEDIAN}}
    row = next(r for r in doc["diff"] if r["field"] == "prices.spotPerHour")
    assert (row["base"], row["measured"]) == (2.2, G5_MEDIAN)
    assert doc["verdict"]["measured"]["spotTotalUsd"] < doc["verdict"]["base"]["spotTotalUsd"]
    listed = _cli("profile", "fit", "--telemetry", str(aws), "--profile", str(BASE), "--out", str(out))
    assert listed.returncode == 0, listed.stderr
    assert yaml.safe_load(out.read_text())["prices"]["spotPerHour"] == 2.2  # listed, not applied
    assert "  - listed, not applied: pass --sku NAME (priced: g5.12xlarge, g6.12xlarge)" in listed.stdout


def test_an_unpriced_sku_is_one_line_exit_2(tmp_path: Path) -> None:
    aws = _write(tmp_path / "aws.json", aws_history())
    done = _cli("profile", "fit", "--telemetry", str(aws), "--sku", "p5.48xlarge")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "--sku 'p5.48xlarge': no spot price of that SKU in the telemetry (priced: g5.12xlarge, g6.12xlarge)" in done.stderr


def test_cost_telemetry_prices_the_skus_median(tmp_path: Path) -> None:
    aws = _write(tmp_path / "aws.json", aws_history())
    done = _cli("cost", "--profile", str(BASE), "--telemetry", str(aws), "--sku", "g5.12xlarge", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["telemetry"]["measured"] == {"prices": {"spotPerHour": G5_MEDIAN}}
    assert non_camel_keys(doc, names_under=["pools"]) == []
    typed = yaml.safe_load(BASE.read_text())
    typed["prices"]["spotPerHour"] = G5_MEDIAN
    (tmp_path / "typed.yaml").write_text(yaml.safe_dump(typed))
    by_hand = json.loads(_cli("cost", "--profile", str(tmp_path / "typed.yaml"), "--json").stdout)
    assert doc["spotTotal"] == by_hand["spotTotal"] and doc["terms"] == by_hand["terms"]
    text = _cli("cost", "--profile", str(BASE), "--telemetry", str(aws), "--sku", "g5.12xlarge")
    assert f"measured from telemetry: prices.spotPerHour {G5_MEDIAN:g}" in text.stdout
    for args, needle in ((("cost", "--profile", str(BASE), "--sku", "g5.12xlarge"), "--sku picks a spot price from "
                          "the telemetry; add --telemetry"),
                         (("cost", "--stack", "prod", "--pool", "train-aws", "--sku", "g5.12xlarge"), "leave out "
                          "--profile, --ladder, --telemetry, --sku")):  # fmt: skip
        bad = _cli(*args)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and needle in bad.stderr, bad.stderr


# --- docs/economics.md §3, exactly as written ---------------------------------------------------------


def _docs_section() -> str:
    doc = (REPO / "docs" / "economics.md").read_text()
    return doc[doc.index("### Spot prices"):doc.index("### The fit")]


def test_the_docs_v1_spot_price_record_is_read_as_written() -> None:
    line = _docs_section().split("```json\n", 1)[1].split("\n```", 1)[0]
    (record,) = parse_lines([line.replace("\n", " ")])
    assert (record.event, record.sku, record.zone, record.pool) == ("spot_price", "a2-highgpu-8g", "us-central1-a", None)


def test_the_docs_commands_run_as_written_and_print_what_they_show(tmp_path: Path) -> None:
    """The files the commands name are made here (an AWS history, an Azure page and the base profile)."""
    section = _docs_section()
    _write(tmp_path / "aws-spot-prices.json", aws_history())
    _write(tmp_path / "azure-retail-prices.json", azure_page())
    (tmp_path / "llm-finetune.yaml").write_text(BASE.read_text())
    commands = section.split("```bash\n", 1)[1].split("\n```", 1)[0].splitlines()
    printed = section.split("prints, among the fit,", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    outputs = []
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "spotgpu"
        done = subprocess.run([sys.executable, "-m", "spotgpu", *argv[1:]], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=180)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    assert printed in outputs[0], outputs[0]
    assert yaml.safe_load((tmp_path / "measured.yaml").read_text())["prices"]["spotPerHour"] == G5_MEDIAN
    assert f"measured from telemetry: prices.spotPerHour {G5_MEDIAN:g}" in outputs[1]
