"""Event times as the clouds and their official samples write them, to Unix seconds: one reader.

The node agent (notice times) and the controller (event times) read the same forms:

* RFC 1123 / RFC 2822 dates, with or without the weekday and with a one- or two-digit day:
  Azure Scheduled Events ``Tue, 16 Mar 2021 00:58:46 GMT``, AWS scheduled events
  ``21 Jan 2019 09:00:43 GMT`` (amazon-ec2-metadata-mock writes ``2 Jan 2006 15:04:05 GMT``),
  AWS Health ``Sat, 05 Jun 2016 15:10:09 GMT``;
* ISO-8601 with or without fractions (up to Azure Event Grid's seven digits) and with or
  without a zone: AWS IMDS and EventBridge ``2017-09-18T08:22:00Z``, Microsoft's Scheduled Events
  mock server ``2026-12-02T18:00:00Z`` in ``NotBefore``, GCE and Cloud Logging
  ``2023-09-16T10:42:31.325309Z``, Event Grid ``2017-06-26T18:41:00.9584103Z``.

A time without a zone is UTC (every cloud above writes UTC). An empty value is "no time".
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

#: ISO-8601 as the clouds write it: a date, ``T`` or a space, a time; fractions and zone optional.
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$", re.IGNORECASE)


def parse_time(value: object) -> float | None:
    """The instant ``value`` names, in Unix seconds; None for an empty value.

    Raises ``ValueError`` for anything else (a placeholder such as AWS's documented
    ``yyyy-mm-ddThh:mm:ssZ``, a number, garbage).
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected a date string, got {value!r}")
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
        raise ValueError(f"{value!r} is neither an RFC 1123 nor an ISO-8601 time")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
