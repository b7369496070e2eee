"""Manifest parts, commit markers and verdicts: what was written, where, how big, and its hash.

All are small JSON documents. A rank's *part* indexes its data; the coordinator's *commit
marker* lists every part with its size and hash. So one chain of hashes leads from the commit
marker to every byte of the generation, and a reader never trusts a listing, a timestamp or
a file it did not check.

Two part formats are read (the marker's ``format`` says which its generation has):

- **format 2** (written now): the rank's values packed into one shard object (more only past
  the split size). The part lists the shard objects (path, size) and, per value, its key,
  shard, offset, size, dtype, shape and one hash per ``hash_block`` bytes of it, so a reader
  verifies each block as it streams in, and can read the blocks of one big value in
  parallel ranges;
- **format 1** (before issue 32): one object per value with one hash each.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from spotgpu.checkpoint.errors import VerificationError
from spotgpu.checkpoint.hashing import HEX_DIGEST_LENGTH
from spotgpu.checkpoint.layout import GENERATION_PATTERN, MAX_STEP

#: The format written now (packed shards); :data:`LEGACY_FORMAT` generations are still read.
FORMAT = 2
LEGACY_FORMAT = 1
VerdictKind = Literal["verification", "commit"]


@dataclass(frozen=True)
class ObjectEntry:
    """Format 1: one saved value in an object of its own; ``kind`` is "bytes", "ndarray" or
    "torch" (then ``dtype``/``shape`` rebuild it). Also the entry of an object the
    coordinator writes whole (DCP's metadata), in either format."""

    key: str
    path: str
    size: int
    hash: str
    kind: str = "bytes"
    dtype: str | None = None
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ItemEntry:
    """Format 2: one saved value inside a shard object: bytes ``[offset, offset + size)`` of
    ``path``, hashed in blocks of ``block`` bytes (``hashes[i]`` covers the value's bytes
    ``[i * block, (i + 1) * block)``; an empty value has the one hash of no bytes)."""

    key: str
    path: str
    offset: int
    size: int
    hashes: tuple[str, ...]
    block: int
    kind: str = "bytes"
    dtype: str | None = None
    shape: tuple[int, ...] | None = None


def block_count(size: int, block: int) -> int:
    """Hashes a value of ``size`` bytes has: one per block, and one for an empty value."""
    return max(1, -(-size // block))


@dataclass(frozen=True)
class ShardRef:
    """One shard object of a rank: the size the store reported after the write."""

    path: str
    size: int


@dataclass(frozen=True)
class RankPart:
    generation: str
    step: int
    rank: int
    world_size: int
    hash_algorithm: str
    #: Format 1 only.
    objects: tuple[ObjectEntry, ...] = ()
    #: Format 2 only: the shard objects, and every value in them.
    shards: tuple[ShardRef, ...] = ()
    items: tuple[ItemEntry, ...] = ()
    hash_block: int = 0
    format: int = FORMAT

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.objects) + sum(i.size for i in self.items)

    @property
    def keys(self) -> list[str]:
        return [o.key for o in self.objects] + [i.key for i in self.items]


@dataclass(frozen=True)
class FailedVerdict:
    """``failed/<step>.json``: the generation of ``step`` failed.

    - ``verification``: a *committed* generation failed its hashes later: ``ckpt list``
      shows it failed, gc retires it first, the step can be saved again;
    - ``commit``: the save never committed (the coordinator gave up, or a rank could not
      write its part): the ranks still waiting for the marker see it on their next poll and
      stop at once. It never marks a committed generation failed (a marker wins)."""

    step: int
    #: None when the commit marker itself could not be decoded.
    generation: str | None
    reason: str
    recorded_at: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat())
    kind: VerdictKind = "verification"
    #: The rank that gave up (commit verdicts).
    rank: int | None = None
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
    return json.dumps(_jsonable(doc), sort_keys=True, separators=(",", ":")).encode()


def _jsonable(doc: RankPart | CommitRecord | FailedVerdict) -> dict[str, Any]:
    if isinstance(doc, FailedVerdict) and doc.format == LEGACY_FORMAT:
        return {k: v for k, v in asdict(doc).items() if k not in ("kind", "rank")}
    if not isinstance(doc, RankPart):
        return asdict(doc)
    head = {
        "format": doc.format,
        "generation": doc.generation,
        "step": doc.step,
        "rank": doc.rank,
        "world_size": doc.world_size,
        "hash_algorithm": doc.hash_algorithm,
    }
    if doc.format == LEGACY_FORMAT:
        return {**head, "objects": [asdict(o) for o in doc.objects]}
    shard_of = {s.path: i for i, s in enumerate(doc.shards)}
    items = [
        {
            "key": i.key,
            "shard": shard_of[i.path],
            "offset": i.offset,
            "size": i.size,
            "hashes": list(i.hashes),
            "kind": i.kind,
            "dtype": i.dtype,
            "shape": None if i.shape is None else list(i.shape),
        }
        for i in doc.items
    ]
    return {**head, "hash_block": doc.hash_block, "shards": [asdict(s) for s in doc.shards], "items": items}


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
_Kind = Literal["bytes", "ndarray", "torch"]


def _known_algorithm(name: str) -> str:
    if name not in HEX_DIGEST_LENGTH:
        raise ValueError(f"hash algorithm {name!r} is not one of {sorted(HEX_DIGEST_LENGTH)}")
    return name


_Algorithm = Annotated[str, AfterValidator(_known_algorithm)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def _check_array(kind: str, dtype: str | None, shape: tuple[int, ...] | None, size: int) -> None:
    """An array entry's dtype and shape must rebuild exactly ``size`` bytes."""
    if kind == "bytes":
        return
    if dtype is None or shape is None:
        raise ValueError(f"a {kind} entry needs dtype and shape")
    if kind == "torch":
        if not re.fullmatch(r"[a-z0-9_]{1,32}", dtype):
            raise ValueError(f"dtype {dtype!r} is not a torch dtype name")
        return
    try:
        np_dtype = np.dtype(dtype)
    except (TypeError, ValueError):
        raise ValueError(f"dtype {dtype!r} is not a numpy dtype") from None
    if np_dtype.hasobject or np_dtype.str != dtype:
        raise ValueError(f"dtype {dtype!r} is not a plain numpy dtype string")
    expected = math.prod(shape) * np_dtype.itemsize
    if expected != size:
        raise ValueError(f"size {size} does not match shape {list(shape)} of {dtype}")


class _EntryModel(_Strict):
    key: _Text
    path: _Text
    size: _Count
    hash: _Hash
    #: "torch": a tensor written by the DCP adapter (dtype is torch's name, e.g. "bfloat16").
    kind: _Kind = "bytes"
    dtype: _Text | None = None
    #: ``[]`` is a 0-d array (shape ``()``), not "no shape".
    shape: tuple[_Count, ...] | None = None

    @model_validator(mode="after")
    def _array_fields(self) -> _EntryModel:
        _check_array(self.kind, self.dtype, self.shape, self.size)
        return self

    def entry(self) -> ObjectEntry:
        return ObjectEntry(self.key, self.path, self.size, self.hash, self.kind, self.dtype, self.shape)


class _ItemModel(_Strict):
    key: _Text
    shard: _Count
    offset: _Count
    size: _Count
    hashes: tuple[_Hash, ...] = Field(min_length=1)
    kind: _Kind = "bytes"
    dtype: _Text | None = None
    shape: tuple[_Count, ...] | None = None

    @model_validator(mode="after")
    def _array_fields(self) -> _ItemModel:
        _check_array(self.kind, self.dtype, self.shape, self.size)
        return self


class _ShardModel(_Strict):
    path: _Text
    size: _Count


def _check_hashes(algorithm: str, hashes: list[str]) -> None:
    length = HEX_DIGEST_LENGTH[algorithm]
    if any(len(h) != length for h in hashes):
        raise ValueError(f"a hash is not {length} hex digits, as {algorithm} makes")


def _check_generation_step(generation: str, step: int) -> None:
    if int(generation[:12]) != step:
        raise ValueError(f"generation {generation!r} does not belong to step {step}")


class _PartHead(_Strict):
    generation: _Generation
    step: _Step
    rank: _Count
    world_size: Annotated[int, Field(ge=1)]
    hash_algorithm: _Algorithm

    def _check_head(self, keys: list[str]) -> None:
        _check_generation_step(self.generation, self.step)
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is outside world_size {self.world_size}")
        if len(set(keys)) != len(keys):
            raise ValueError("two values have the same key")


class _PartModel(_PartHead):
    format: Literal[1]
    objects: tuple[_EntryModel, ...]

    @model_validator(mode="after")
    def _consistent(self) -> _PartModel:
        self._check_head([o.key for o in self.objects])
        _check_hashes(self.hash_algorithm, [o.hash for o in self.objects])
        return self

    def part(self) -> RankPart:
        objects = tuple(o.entry() for o in self.objects)
        return RankPart(
            self.generation, self.step, self.rank, self.world_size, self.hash_algorithm, objects, format=self.format
        )


class _PartModelV2(_PartHead):
    format: Literal[2]
    hash_block: Annotated[int, Field(ge=1)]
    shards: tuple[_ShardModel, ...]
    items: tuple[_ItemModel, ...]

    @model_validator(mode="after")
    def _consistent(self) -> _PartModelV2:
        self._check_head([i.key for i in self.items])
        _check_hashes(self.hash_algorithm, [h for i in self.items for h in i.hashes])
        if len({s.path for s in self.shards}) != len(self.shards):
            raise ValueError("two shards have the same path")
        ends: dict[int, int] = {}
        for item in sorted(self.items, key=lambda i: (i.shard, i.offset)):
            if item.shard >= len(self.shards):
                raise ValueError(f"value {item.key!r} names shard {item.shard} of {len(self.shards)}")
            if item.offset < ends.get(item.shard, 0):
                raise ValueError(f"value {item.key!r} overlaps the value before it")
            ends[item.shard] = item.offset + item.size
            if ends[item.shard] > self.shards[item.shard].size:
                raise ValueError(f"value {item.key!r} ends past its shard's {self.shards[item.shard].size} bytes")
            if len(item.hashes) != block_count(item.size, self.hash_block):
                raise ValueError(f"value {item.key!r} has {len(item.hashes)} block hashes for {item.size} bytes")
        return self

    def part(self) -> RankPart:
        shards = tuple(ShardRef(s.path, s.size) for s in self.shards)
        items = tuple(
            ItemEntry(
                i.key, shards[i.shard].path, i.offset, i.size, i.hashes, self.hash_block, i.kind, i.dtype, i.shape
            )
            for i in self.items
        )
        return RankPart(
            self.generation,
            self.step,
            self.rank,
            self.world_size,
            self.hash_algorithm,
            shards=shards,
            items=items,
            hash_block=self.hash_block,
            format=self.format,
        )


_ANY_PART: TypeAdapter[_PartModel | _PartModelV2] = TypeAdapter(
    Annotated[_PartModel | _PartModelV2, Field(discriminator="format")]
)


class _PartRefModel(_Strict):
    rank: _Count
    path: _Text
    size: _Count
    hash: _Hash


class _CommitModel(_Strict):
    format: Literal[1, 2]
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
        doc = _ANY_PART.validate_json(bytes(data))
    except ValidationError as err:
        raise VerificationError(f"{what} is malformed: {_problem(err)}") from None
    return doc.part()


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


class _VerdictModelV2(_VerdictModel):
    format: Literal[2]  # type: ignore[assignment]
    kind: Literal["verification", "commit"]
    rank: _Count | None = None


_ANY_VERDICT: TypeAdapter[_VerdictModel | _VerdictModelV2] = TypeAdapter(
    Annotated[_VerdictModel | _VerdictModelV2, Field(discriminator="format")]
)


def decode_verdict(data: bytes | bytearray, what: str = "failed verdict") -> FailedVerdict:
    try:
        doc = _ANY_VERDICT.validate_json(bytes(data))
    except ValidationError as err:
        raise VerificationError(f"{what} is malformed: {_problem(err)}") from None
    if isinstance(doc, _VerdictModelV2):
        return FailedVerdict(doc.step, doc.generation, doc.reason, doc.recorded_at, doc.kind, doc.rank, doc.format)
    return FailedVerdict(doc.step, doc.generation, doc.reason, doc.recorded_at, "verification", None, doc.format)
