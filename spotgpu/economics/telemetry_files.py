"""Telemetry files as platform teams have them: raw JSON lines, or a cloud's log export.

The agent and the controller write JSON lines; on a fleet those lines are shipped to the
cloud's log service and come back as an export. Each export wraps the same line differently:

* **CloudWatch Logs**, ``aws logs filter-log-events --output json``: ``{"events": [{"logStreamName",
  "timestamp" (ms), "message": "<the JSON line>"}, ...]}``; the stream is the log stream (one per VM);
* **Cloud Logging**, ``gcloud logging read --format=json``: a list of LogEntry, the line as
  ``jsonPayload`` (or a JSON ``textPayload``), ``timestamp`` RFC 3339; the stream is the instance
  (``resource.labels.instance_id``) and the log name;
* **Azure Log Analytics** rows, ``az monitor log-analytics query`` (a list of row objects) or the
  REST/``--output json`` table form (``{"tables": [{"columns", "rows"}]}``): the line in
  ``RawData`` (custom text logs), ``Message`` or ``Log_s``, ``TimeGenerated``; the stream is
  ``Computer`` or ``_ResourceId``.

Spot prices come from the price exports platform teams have, each item a v1 ``spot_price``:

* **AWS**, ``aws ec2 describe-spot-price-history --output json``: ``{"SpotPriceHistory":
  [{"AvailabilityZone", "InstanceType", "ProductDescription", "SpotPrice" (a string), "Timestamp"}]}``;
  Linux/UNIX only (a Windows price carries its licence);
* **Azure**, the Retail Prices API's pages (``https://prices.azure.com/api/retail/prices``):
  ``{"Items": [{"armSkuName", "armRegionName", "skuName", "productName", "retailPrice",
  "unitOfMeasure", "type", "effectiveStartDate", ...}], "NextPageLink"}``; Spot Linux
  consumption prices per hour only.

GCP has no per-machine-type spot price export (the Cloud Billing Catalog prices each vCPU, GB
of memory and GPU apart), so a GCP pool's spot price is a v1 ``spot_price`` record or config.

:func:`read_files` takes any mix and yields schema v1 records (``spotgpu.economics.telemetry``).
JSON lines are streamed (a million lines stay small in memory); an export is one JSON document
and is loaded whole.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from spotgpu.economics.telemetry import (
    ReadStats,
    StreamContext,
    TelemetryRecord,
    describe_validation,
    normalize,
    parse_stream,
    parse_ts,
)

FORMATS = ("auto", "jsonl", "cloudwatch", "cloud-logging", "log-analytics", "aws-spot-prices", "azure-retail-prices")
_AZURE_TEXT = ("RawData", "Message", "Log_s", "message")


def detect_format(path: Path) -> str:
    """``jsonl`` when the first line is a whole JSON object; else the export its document looks like."""
    with path.open(encoding="utf-8") as fh:
        first = ""
        for line in fh:
            if line.strip():
                first = line.strip()
                break
    if not first:
        return "jsonl"
    try:
        obj = json.loads(first)
        if isinstance(obj, dict) and ("record" in obj or "kind" in obj or "event" in obj):
            return "jsonl"
    except json.JSONDecodeError:
        pass
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path}:{err.lineno}: not JSON lines and not a JSON export ({err.msg}); pass the agent's or the "
            "controller's events log, or an export (CloudWatch, Cloud Logging, Log Analytics)"
        ) from None
    if isinstance(doc, dict) and "events" in doc:
        return "cloudwatch"
    if isinstance(doc, dict) and "tables" in doc:
        return "log-analytics"
    if isinstance(doc, dict) and "SpotPriceHistory" in doc:
        return "aws-spot-prices"
    if isinstance(doc, dict) and "Items" in doc:
        return "azure-retail-prices"
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        if "jsonPayload" in doc[0] or "textPayload" in doc[0] or "logName" in doc[0]:
            return "cloud-logging"
        if any(k in doc[0] for k in (*_AZURE_TEXT, "TimeGenerated")):
            return "log-analytics"
    if isinstance(doc, list) and not doc:
        return "cloud-logging"
    raise ValueError(
        f"{path}: a JSON document of no known export shape; pass --telemetry-format cloudwatch, cloud-logging, "
        "log-analytics, aws-spot-prices or azure-retail-prices"
    )


def _cloudwatch(doc: Any) -> Iterator[tuple[str, object, float | None, str]]:
    for i, e in enumerate(doc.get("events", [])):
        ts = e.get("timestamp")
        yield str(e.get("logStreamName", "")), _embedded(e.get("message")), (ts / 1000.0 if ts else None), f"events[{i}]"


def _cloud_logging(doc: Any) -> Iterator[tuple[str, object, float | None, str]]:
    for i, e in enumerate(doc):
        labels = (e.get("resource") or {}).get("labels") or {}
        stream = f"{labels.get('instance_id', '')}/{e.get('logName', '')}"
        payload = e["jsonPayload"] if "jsonPayload" in e else _embedded(e.get("textPayload"))
        ts = parse_ts(e["timestamp"]) if e.get("timestamp") else None
        yield stream, payload, ts if isinstance(ts, float) else None, f"[{i}]"


def _log_analytics(doc: Any) -> Iterator[tuple[str, object, float | None, str]]:
    if isinstance(doc, dict):  # REST form: columns + rows
        rows: list[dict[str, Any]] = []
        for table in doc.get("tables", []):
            names = [c["name"] for c in table.get("columns", [])]
            rows.extend(dict(zip(names, row, strict=False)) for row in table.get("rows", []))
    else:
        rows = doc
    for i, row in enumerate(rows):
        text = next((row[k] for k in _AZURE_TEXT if row.get(k)), None)
        stream = str(row.get("Computer") or row.get("_ResourceId") or "")
        ts = parse_ts(row["TimeGenerated"]) if row.get("TimeGenerated") else None
        yield stream, _embedded(text), ts if isinstance(ts, float) else None, f"row {i}"


def _embedded(text: object) -> object:
    """The JSON line a log service stored as text (agent lines may carry a logger prefix before the brace)."""
    if not isinstance(text, str):
        return text
    brace = text.find("{")
    try:
        return json.loads(text[brace:] if brace >= 0 else text)
    except json.JSONDecodeError:
        return text


_EXPORTS = {"cloudwatch": _cloudwatch, "cloud-logging": _cloud_logging, "log-analytics": _log_analytics}

#: A price item: where it is in the document, and its v1 ``spot_price`` dict or why it was skipped.
PriceItem = tuple[str, dict[str, Any] | str]


def _aws_spot_prices(doc: Any, path: Path, stats: ReadStats) -> Iterator[PriceItem]:
    """Linux/UNIX prices of ``describe-spot-price-history``, each (type, zone, time) once."""
    items = doc.get("SpotPriceHistory") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"{path}: no SpotPriceHistory list; pass the JSON of "
                         "`aws ec2 describe-spot-price-history --output json` as it prints it")  # fmt: skip
    if doc.get("NextToken"):
        stats.notes.append(f"{path}: NextToken is set, so the history goes on past this page; without --max-items "
                           "the CLI reads every page")  # fmt: skip
    seen: set[tuple[object, object, object]] = set()
    for i, item in enumerate(items):
        where = f"SpotPriceHistory[{i}]"
        if not isinstance(item, dict):
            yield where, "not an object"
        elif not (product := str(item.get("ProductDescription") or "no ProductDescription")).startswith("Linux/UNIX"):
            yield where, product  # Windows, SUSE, Red Hat: a licence is in the price
        elif (key := (item.get("InstanceType"), item.get("AvailabilityZone"), item.get("Timestamp"))) in seen:
            yield where, "duplicate"  # Linux/UNIX and Linux/UNIX (Amazon VPC) of one zone at one time
        else:
            seen.add(key)
            yield where, {"ts": item.get("Timestamp"), "event": "spot_price", "provider": "aws",
                          "sku": item.get("InstanceType"), "zone": item.get("AvailabilityZone"),
                          "usdPerHour": item.get("SpotPrice")}  # fmt: skip


def _azure_retail_prices(doc: Any, path: Path, stats: ReadStats) -> Iterator[PriceItem]:
    """Spot Linux pay-as-you-go hourly prices of a Retail Prices API page."""
    items = doc.get("Items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"{path}: no Items list; pass a page of https://prices.azure.com/api/retail/prices as it "
                         "returns it")  # fmt: skip
    if doc.get("NextPageLink"):
        stats.notes.append(f"{path}: NextPageLink is set, so the prices go on in another page; fetch every page "
                           "(follow NextPageLink) and pass them all")  # fmt: skip
    for i, item in enumerate(items):
        where = f"Items[{i}]"
        skip = _azure_skip(item)
        if skip is not None:
            yield where, skip
            continue
        currency = item.get("currencyCode", "USD")
        if currency != "USD":
            raise ValueError(f"{path} {where}.currencyCode {currency!r}: the cost model is in USD; fix: fetch the "
                             "prices without currencyCode (USD is the default)")  # fmt: skip
        yield where, {"ts": item.get("effectiveStartDate"), "event": "spot_price", "provider": "azure",
                      "sku": item.get("armSkuName"), "zone": item.get("armRegionName"),
                      "usdPerHour": item.get("retailPrice", item.get("unitPrice"))}  # fmt: skip


def _azure_skip(item: object) -> str | None:
    """Why an item is not a Linux VM's spot price per hour (None: it is one)."""
    if not isinstance(item, dict):
        return "not an object"
    if item.get("serviceName", "Virtual Machines") != "Virtual Machines":
        return "not a VM"
    if "Spot" not in str(item.get("skuName", "")):
        return "not Spot"  # pay-as-you-go and Low Priority
    if "Windows" in str(item.get("productName", "")):
        return "Windows"
    if item.get("type", "Consumption") != "Consumption":
        return f"{item.get('type')} price"  # DevTestConsumption, Reservation
    if item.get("unitOfMeasure", "1 Hour") != "1 Hour":
        return f"per {item.get('unitOfMeasure')}"
    if item.get("retailPrice", item.get("unitPrice")) == 0:
        return "zero price"
    return None


_PRICES = {"aws-spot-prices": _aws_spot_prices, "azure-retail-prices": _azure_retail_prices}
#: The export's own name of each v1 field, so an error names the key the user's file has.
_PRICE_KEYS = {
    "aws-spot-prices": {"ts": "Timestamp", "sku": "InstanceType", "zone": "AvailabilityZone", "usdPerHour": "SpotPrice"},
    "azure-retail-prices": {"ts": "effectiveStartDate", "sku": "armSkuName", "zone": "armRegionName",
                            "usdPerHour": "retailPrice"},
}  # fmt: skip
_PRICE_FIX = {
    "aws-spot-prices": "export Linux prices: aws ec2 describe-spot-price-history --product-descriptions Linux/UNIX "
                       "--instance-types TYPE --output json",
    "azure-retail-prices": "export Spot Linux prices: $filter=serviceName eq 'Virtual Machines' and armSkuName eq "
                           "'SIZE' and priceType eq 'Consumption' and contains(skuName, 'Spot')",
}  # fmt: skip


def _read_prices(path: Path, kind: str, doc: Any, stats: ReadStats) -> Iterator[TelemetryRecord]:
    """The export's usable prices as v1 records; a document without one is an error, not an empty fit."""
    skipped: Counter[str] = Counter()
    taken = 0
    for where, item in _PRICES[kind](doc, path, stats):
        stats.lines += 1
        if isinstance(item, str):
            skipped[item] += 1
            continue
        try:
            record = TelemetryRecord.model_validate(item)
        except ValidationError as err:
            raise ValueError(f"{path} {where}.{_price_problem(err, _PRICE_KEYS[kind])}") from None
        stats.records += 1
        taken += 1
        yield record
    for reason, n in skipped.items():
        stats.skipped[f"{kind}:{reason}"] += n
    if not taken:
        seen = ", ".join(f"{n} {k}" for k, n in sorted(skipped.items())) or "no items"
        raise ValueError(f"{path}: no usable spot price in it ({seen}); fix: {_PRICE_FIX[kind]}")


def _price_problem(err: ValidationError, keys: dict[str, str]) -> str:
    """``<export key> <value>: <what>``, the key as the export names it."""
    first = err.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    name = keys.get(field, keys.get(to_camel(field), field))
    what = str(first["msg"]).removeprefix("Value error, ")
    return f"{name} {first.get('input')!r}: {what}"


def read_file(path: str | Path, stats: ReadStats, fmt: str = "auto") -> Iterator[TelemetryRecord]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--telemetry {path}: no such file; pass an events log or a log export")
    kind = detect_format(p) if fmt == "auto" else fmt
    if kind == "jsonl":
        with p.open("rb") as fh:
            yield from parse_stream(fh, str(p), stats)
        return
    doc = _document(p)
    if kind in _PRICES:
        yield from _read_prices(p, kind, doc, stats)
        return
    contexts: dict[str, StreamContext] = {}
    for stream, obj, ts, where in _EXPORTS[kind](doc):
        stats.lines += 1
        if not isinstance(obj, dict):
            stats.skipped[f"{kind}:not-spotgpu-json"] += 1  # other programs' lines share the log group
            continue
        ctx = contexts.setdefault(stream, StreamContext(f"{p}:{stream}"))
        try:
            yield from normalize(obj, ctx, stats, fallback_ts=ts)
        except ValidationError as err:
            raise ValueError(f"{p} {where}: {describe_validation(err)}") from None
        except ValueError as err:
            raise ValueError(f"{p} {where}: {err}") from None


def _document(path: Path) -> Any:
    """An export is one JSON document; one that does not parse is one line naming the file and line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not a JSON document ({err.msg}); pass the export as the tool printed it") from None


def read_files(paths: Sequence[str | Path], fmt: str = "auto", stats: ReadStats | None = None) -> Iterator[TelemetryRecord]:
    """Every record of every file, file by file (the fit does not need them in time order)."""
    stats = stats if stats is not None else ReadStats()
    for path in paths:
        yield from read_file(path, stats, fmt)


def read_jsonl(path: str | Path) -> list[TelemetryRecord]:
    """All records of one file (events log or export), in time order; the fit streams instead."""
    return sorted(read_file(path, ReadStats()), key=lambda r: r.ts)
