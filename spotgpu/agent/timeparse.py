"""Notice times, read with the contract's one time reader (:mod:`spotgpu.contract.times`).

A time that cannot be read raises :class:`MetadataError` ``malformed``, naming the field; the
monitors keep the notice anyway (it is never dropped for its date): see ``unparsed_time`` in
:mod:`spotgpu.agent.events`.
"""

from __future__ import annotations

from spotgpu.agent.http import MetadataError
from spotgpu.contract.times import parse_time


def cloud_time(value: object, field: str) -> float | None:
    """The instant ``value`` names (RFC 1123 or ISO-8601), in Unix seconds; None for an empty value."""
    try:
        return parse_time(value)
    except ValueError as err:
        raise MetadataError("malformed", f"{field}: {err}") from None


def required_time(value: object, field: str) -> float:
    """:func:`cloud_time` for a field that must name a time (an empty value is malformed too)."""
    at = cloud_time(value, field)
    if at is None:
        raise MetadataError("malformed", f"{field}: empty, expected a time")
    return at
