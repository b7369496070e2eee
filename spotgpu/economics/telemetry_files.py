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

:func:`read_files` takes any mix and yields schema v1 records (``spotgpu.economics.telemetry``).
JSON lines are streamed (a million lines stay small in memory); an export is one JSON document
and is loaded whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spotgpu.economics.telemetry import (
    ReadStats,
    StreamContext,
    TelemetryRecord,
    describe_validation,
    normalize,
    parse_stream,
    parse_ts,
)

FORMATS = ("auto", "jsonl", "cloudwatch", "cloud-logging", "log-analytics")
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
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        if "jsonPayload" in doc[0] or "textPayload" in doc[0] or "logName" in doc[0]:
            return "cloud-logging"
        if any(k in doc[0] for k in (*_AZURE_TEXT, "TimeGenerated")):
            return "log-analytics"
    if isinstance(doc, list) and not doc:
        return "cloud-logging"
    raise ValueError(
        f"{path}: a JSON document of no known export shape; pass --format cloudwatch, cloud-logging or log-analytics"
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


def read_file(path: str | Path, stats: ReadStats, fmt: str = "auto") -> Iterator[TelemetryRecord]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--telemetry {path}: no such file; pass an events log or a log export")
    kind = detect_format(p) if fmt == "auto" else fmt
    if kind == "jsonl":
        with p.open("rb") as fh:
            yield from parse_stream(fh, str(p), stats)
        return
    contexts: dict[str, StreamContext] = {}
    for stream, obj, ts, where in _EXPORTS[kind](json.loads(p.read_text(encoding="utf-8"))):
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


def read_files(paths: Sequence[str | Path], fmt: str = "auto", stats: ReadStats | None = None) -> Iterator[TelemetryRecord]:
    """Every record of every file, file by file (the fit does not need them in time order)."""
    stats = stats if stats is not None else ReadStats()
    for path in paths:
        yield from read_file(path, stats, fmt)


def read_jsonl(path: str | Path) -> list[TelemetryRecord]:
    """All records of one file (events log or export), in time order; the fit streams instead."""
    return sorted(read_file(path, ReadStats()), key=lambda r: r.ts)
