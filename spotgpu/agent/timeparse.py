"""Timestamps as the metadata services write them, to Unix seconds."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from spotgpu.agent.http import MetadataError


def iso8601(value: object, field: str) -> float:
    """AWS IMDS form: ``2017-09-18T08:22:00Z``."""
    if not isinstance(value, str):
        raise MetadataError("malformed", f"{field}: expected an ISO-8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise MetadataError("malformed", f"{field}: {value!r} is not ISO-8601") from err
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def rfc1123(value: object, field: str) -> float | None:
    """Azure Scheduled Events form: ``Tue, 16 Mar 2021 00:58:46 GMT``; empty once started."""
    if value in ("", None):
        return None
    if not isinstance(value, str):
        raise MetadataError("malformed", f"{field}: expected an RFC 1123 date, got {value!r}")
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError) as err:
        raise MetadataError("malformed", f"{field}: {value!r} is not an RFC 1123 date") from err
