"""Manifest parts and commit markers: what was written, how big, and its hash.

Both are small JSON documents. A rank's *part* lists its objects; the coordinator's
*commit marker* lists every part with its size and hash. So one chain of hashes leads
from the commit marker to every byte of the generation, and a reader never trusts a
listing, a timestamp or a file it did not check.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from spotgpu.checkpoint.errors import VerificationError

FORMAT = 1


@dataclass(frozen=True)
class ObjectEntry:
    """One saved value: ``kind`` is "bytes" or "ndarray" (then ``dtype``/``shape`` rebuild it)."""

    key: str
    path: str
    size: int
    hash: str
    kind: str = "bytes"
    dtype: str | None = None
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class RankPart:
    generation: str
    step: int
    rank: int
    world_size: int
    hash_algorithm: str
    objects: tuple[ObjectEntry, ...]
    format: int = FORMAT

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.objects)


@dataclass(frozen=True)
class PartRef:
    rank: int
    path: str
    size: int
    hash: str


@dataclass(frozen=True)
class CommitRecord:
    generation: str
    step: int
    world_size: int
    hash_algorithm: str
    parts: tuple[PartRef, ...]
    total_bytes: int
    #: Objects the coordinator wrote itself (e.g. torch DCP's global metadata).
    extra_objects: tuple[ObjectEntry, ...] = ()
    committed_at: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat())
    format: int = FORMAT


def encode(doc: RankPart | CommitRecord) -> bytes:
    return json.dumps(asdict(doc), sort_keys=True, separators=(",", ":")).encode()


def _load(data: bytes | bytearray, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(bytes(data))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise VerificationError(f"{what} is not valid JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise VerificationError(f"{what} has unknown format {doc.get('format') if isinstance(doc, dict) else doc!r}")
    return doc


def _entry(doc: dict[str, Any]) -> ObjectEntry:
    return ObjectEntry(**{**doc, "shape": tuple(doc["shape"]) if doc.get("shape") is not None else None})


def decode_part(data: bytes | bytearray, what: str = "manifest part") -> RankPart:
    doc = _load(data, what)
    try:
        objects = tuple(_entry(o) for o in doc.pop("objects"))
        return RankPart(objects=objects, **doc)
    except (KeyError, TypeError) as err:
        raise VerificationError(f"{what} is malformed ({err})") from None


def decode_commit(data: bytes | bytearray, what: str = "commit marker") -> CommitRecord:
    doc = _load(data, what)
    try:
        parts = tuple(PartRef(**p) for p in doc.pop("parts"))
        extras = tuple(_entry(o) for o in doc.pop("extra_objects", ()))
        return CommitRecord(parts=parts, extra_objects=extras, **doc)
    except (KeyError, TypeError) as err:
        raise VerificationError(f"{what} is malformed ({err})") from None
