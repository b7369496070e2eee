"""Plain values out of the engine's property maps, with preview unknowns made explicit.

pulumi_policy hands policies proxies that raise ``UnknownValueError`` the moment
an unknown value is touched; the SDK then turns the whole policy into an
*advisory* "can't run policy during preview" note. For a mandatory rule that is a
silent pass, so every rule here reads properties through :func:`plain`, which
replaces each unknown with the :data:`UNKNOWN` marker. Rules then say, in their
own message, which value was unknown and how to make it knowable.
"""

from __future__ import annotations

import base64
import binascii
import gzip
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pulumi_policy.proxy import UnknownValueError

#: The engine's unknown sentinels (string, bool, number, array, asset, archive, object).
UNKNOWN_SENTINELS: Final = frozenset(
    {
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
        "030794c1-ac77-496b-92df-f27374a8bd58",
        "e48ece36-62e2-4504-bad9-02848725956a",
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
    }
)


class _Unknown:
    """A value the engine cannot know until the update runs."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown until apply>"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Final = _Unknown()


def plain(value: Any) -> Any:
    """Deep copy of a (proxied) property value with unknowns replaced by :data:`UNKNOWN`."""
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                item = value[key]
            except UnknownValueError:
                item = UNKNOWN
            out[str(key)] = plain(item)
        return out
    if isinstance(value, Sequence):
        items = []
        for i in range(len(value)):
            try:
                item = value[i]
            except UnknownValueError:
                item = UNKNOWN
            items.append(plain(item))
        return items
    return value


def dig(obj: Any, *path: str | int) -> Any:
    """``obj[p0][p1]...``: None when a step is missing, UNKNOWN when a step is unknown."""
    for key in path:
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(key, int):
            if not isinstance(obj, list) or key >= len(obj):
                return None
            obj = obj[key]
        else:
            if not isinstance(obj, dict):
                return None
            obj = obj.get(key)
    return obj


def as_list(value: Any) -> list[Any]:
    """A list property; missing is empty; an unknown list becomes ``[UNKNOWN]``."""
    if value is UNKNOWN:
        return [UNKNOWN]
    return value if isinstance(value, list) else []


def as_number(value: Any) -> float | None:
    """Numbers arrive as floats (or numeric strings in some schemas)."""
    if isinstance(value, bool) or value is None or value is UNKNOWN:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def decode_bootstrap(value: Any) -> Any:
    """User data / custom data as text: base64 (optionally gzip) decoded, else taken as written."""
    if not isinstance(value, str):
        return value
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError:
            return value
    return raw.decode("utf-8", errors="replace")
