"""Timestamps as the clouds and their official samples write them, to Unix seconds.

One reader for every notice time, because the same field comes in several forms:

* RFC 1123 / RFC 2822 dates, with or without the weekday and with a one- or two-digit day:
  Azure Scheduled Events ``Tue, 16 Mar 2021 00:58:46 GMT``, AWS scheduled events
  ``21 Jan 2019 09:00:43 GMT`` (amazon-ec2-metadata-mock writes ``2 Jan 2006 15:04:05 GMT``),
  AWS Health ``Sat, 05 Jun 2016 15:10:09 GMT``;
* ISO-8601 with or without fractions (up to Azure Event Grid's seven digits) and with or
  without a zone: AWS IMDS ``2017-09-18T08:22:00Z``, Microsoft's Scheduled Events mock server
  ``2026-12-02T18:00:00Z`` in ``NotBefore``, GCE ``2024-12-01T19:00:01Z``.

A time without a zone is UTC (every cloud above writes UTC). An empty value is "no time"
(Azure empties ``NotBefore`` once an event starts). Anything else that cannot be read raises
:class:`MetadataError` ``malformed``, and the caller keeps the notice (it never drops one for
its date): see ``unparsed_time`` in :mod:`spotgpu.agent.events`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from spotgpu.agent.http import MetadataError

#: ISO-8601 as the clouds write it: a date, ``T`` or a space, a time; fractions and zone optional.
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$", re.IGNORECASE)


def cloud_time(value: object, field: str) -> float | None:
    """The instant ``value`` names, in Unix seconds; None for an empty value.

    Raises :class:`MetadataError` (reason ``malformed``) for anything else, naming ``field``.
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MetadataError("malformed", f"{field}: expected a date string, got {value!r}")
    text = value.strip()
    parsed: datetime | None = None
    if _ISO.match(text):
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            parsed = None
    else:
        try:
            parsed = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            parsed = None
    if parsed is None:
        raise MetadataError("malformed", f"{field}: {value!r} is neither an RFC 1123 nor an ISO-8601 time")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def required_time(value: object, field: str) -> float:
    """:func:`cloud_time` for a field that must name a time (an empty value is malformed too)."""
    at = cloud_time(value, field)
    if at is None:
        raise MetadataError("malformed", f"{field}: empty, expected a time")
    return at
