"""Manifest parts and commit markers: what was written, how big, and its hash.

Both are small JSON documents. A rank's *part* lists its objects; the coordinator's
*commit marker* lists every part with its size and hash. So one chain of hashes leads
from the commit marker to every byte of the generation, and a reader never trusts a
listing, a timestamp or a file it did not check.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Annotated, Literal

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.hashing import HEX_DIGEST_LENGTH
from spotgpu.checkpoint.layout import GENERATION_PATTERN, MAX_STEP

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
class FailedVerdict:
    """A committed step whose generation failed verification (``failed/<step>.json``):
    ``ckpt list`` shows it as failed, gc retires it first, and the step can be saved again."""

    step: int
    #: None when the commit marker itself could not be decoded.
    generation: str | None
    reason: str
    recorded_at: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat())
    format: int = FORMAT


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


def encode(doc: RankPart | CommitRecord | FailedVerdict) -> bytes:
    return json.dumps(asdict(doc), sort_keys=True, separators=(",", ":")).encode()


# ---- decoding: one strict model for every part and marker ---------------------------
#
# A marker or part is whatever bytes the store returns: truncated, bit-flipped, written
# by a future version or by hand. Decoding goes through these pydantic models only
# (strict types, no unknown keys, no coercion of "1" to 1), so anything malformed is a
# VerificationError naming the field, and the generation counts as not committed.

_Step = Annotated[int, Field(ge=0, le=MAX_STEP)]
_Count = Annotated[int, Field(ge=0)]
_Text = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
_Hash = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16,128}$")]
_Generation = Annotated[str, StringConstraints(pattern=GENERATION_PATTERN)]


def _known_algorithm(name: str) -> str:
    if name not in HEX_DIGEST_LENGTH:
        raise ValueError(f"hash algorithm {name!r} is not one of {sorted(HEX_DIGEST_LENGTH)}")
    return name


_Algorithm = Annotated[str, AfterValidator(_known_algorithm)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _EntryModel(_Strict):
    key: _Text
    path: _Text
    size: _Count
    hash: _Hash
    #: "torch": a tensor written by the DCP adapter (dtype is torch's name, e.g. "bfloat16").
    kind: Literal["bytes", "ndarray", "torch"] = "bytes"
    dtype: _Text | None = None
    #: ``[]`` is a 0-d array (shape ``()``), not "no shape".
    shape: tuple[_Count, ...] | None = None

    @model_validator(mode="after")
    def _array_fields(self) -> _EntryModel:
        if self.kind == "bytes":
            return self
        if self.dtype is None or self.shape is None:
            raise ValueError(f"a {self.kind} entry needs dtype and shape")
        if self.kind == "torch":
            if not re.fullmatch(r"[a-z0-9_]{1,32}", self.dtype):
                raise ValueError(f"dtype {self.dtype!r} is not a torch dtype name")
            return self
        try:
            dtype = np.dtype(self.dtype)
        except (TypeError, ValueError):
            raise ValueError(f"dtype {self.dtype!r} is not a numpy dtype") from None
        if dtype.hasobject or dtype.str != self.dtype:
            raise ValueError(f"dtype {self.dtype!r} is not a plain numpy dtype string")
        expected = math.prod(self.shape) * dtype.itemsize
        if expected != self.size:
            raise ValueError(f"size {self.size} does not match shape {list(self.shape)} of {self.dtype}")
        return self

    def entry(self) -> ObjectEntry:
        return ObjectEntry(self.key, self.path, self.size, self.hash, self.kind, self.dtype, self.shape)


def _check_hashes(algorithm: str, hashes: list[str]) -> None:
    length = HEX_DIGEST_LENGTH[algorithm]
    if any(len(h) != length for h in hashes):
        raise ValueError(f"a hash is not {length} hex digits, as {algorithm} makes")


def _check_generation_step(generation: str, step: int) -> None:
    if int(generation[:12]) != step:
        raise ValueError(f"generation {generation!r} does not belong to step {step}")


class _PartModel(_Strict):
    format: Literal[1]
    generation: _Generation
    step: _Step
    rank: _Count
    world_size: Annotated[int, Field(ge=1)]
    hash_algorithm: _Algorithm
    objects: tuple[_EntryModel, ...]

    @model_validator(mode="after")
    def _consistent(self) -> _PartModel:
        _check_generation_step(self.generation, self.step)
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is outside world_size {self.world_size}")
        if len({o.key for o in self.objects}) != len(self.objects):
            raise ValueError("two objects have the same key")
        _check_hashes(self.hash_algorithm, [o.hash for o in self.objects])
        return self


class _PartRefModel(_Strict):
    rank: _Count
    path: _Text
    size: _Count
    hash: _Hash


class _CommitModel(_Strict):
    format: Literal[1]
    generation: _Generation
    step: _Step
    world_size: Annotated[int, Field(ge=1)]
    hash_algorithm: _Algorithm
    parts: tuple[_PartRefModel, ...]
    total_bytes: _Count
    extra_objects: tuple[_EntryModel, ...] = ()
    committed_at: _Text

    @model_validator(mode="after")
    def _consistent(self) -> _CommitModel:
        _check_generation_step(self.generation, self.step)
        if sorted(p.rank for p in self.parts) != list(range(self.world_size)):
            raise ValueError(f"parts name ranks {[p.rank for p in self.parts]}, not 0..{self.world_size - 1}")
        _check_hashes(self.hash_algorithm, [p.hash for p in self.parts] + [o.hash for o in self.extra_objects])
        return self


def _problem(err: ValidationError) -> str:
    """The first problem in one line: where, what, and (shortened) the value found."""
    first = err.errors(include_url=False)[0]
    # Keys come from the bytes being decoded: escape them so the line stays one line.
    where = ascii(".".join(str(x) for x in first["loc"]))[1:-1] or "document"
    value = ascii(first.get("input"))
    value = value if len(value) <= 60 else value[:57] + "..."
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    if first["type"] == "json_invalid":
        return f"is not valid JSON ({first['msg']})"
    return f"field {where}: {first['msg']} (found {value}){more}"


def decode_part(data: bytes | bytearray, what: str = "manifest part") -> RankPart:
    try:
        doc = _PartModel.model_validate_json(bytes(data))
    except ValidationError as err:
        raise VerificationError(f"{what} is malformed: {_problem(err)}") from None
    objects = tuple(o.entry() for o in doc.objects)
    return RankPart(doc.generation, doc.step, doc.rank, doc.world_size, doc.hash_algorithm, objects, doc.format)


def decode_commit(data: bytes | bytearray, what: str = "commit marker") -> CommitRecord:
    try:
        doc = _CommitModel.model_validate_json(bytes(data))
    except ValidationError as err:
        raise VerificationError(f"{what} is malformed: {_problem(err)}") from None
    parts = tuple(PartRef(p.rank, p.path, p.size, p.hash) for p in doc.parts)
    extras = tuple(o.entry() for o in doc.extra_objects)
    return CommitRecord(
        doc.generation,
        doc.step,
        doc.world_size,
        doc.hash_algorithm,
        parts,
        doc.total_bytes,
        extras,
        doc.committed_at,
        doc.format,
    )


class _VerdictModel(_Strict):
    format: Literal[1]
    step: _Step
    generation: _Generation | None
    reason: Annotated[str, StringConstraints(max_length=100_000)]
    recorded_at: _Text


def decode_verdict(data: bytes | bytearray, what: str = "failed verdict") -> FailedVerdict:
    try:
        doc = _VerdictModel.model_validate_json(bytes(data))
    except ValidationError as err:
        raise VerificationError(f"{what} is malformed: {_problem(err)}") from None
    return FailedVerdict(doc.step, doc.generation, doc.reason, doc.recorded_at, doc.format)
