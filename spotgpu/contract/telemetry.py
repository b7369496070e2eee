"""The telemetry schema the node agent and the controller write and the fleet's readers read.

Both producers write JSON lines: the agent's events log (:mod:`spotgpu.contract.agent_records`,
``{"v", "ts", "record", ...}``) and the controller's events (:mod:`spotgpu.contract.controller_events`,
``{"v", "kind", "pool", "at", ...}``). Each record kind is one :class:`Fields` class here: its fields
are typed once, the producer builds the record from it, and a reader parses a line back into it
(``spotgpu.economics.telemetry`` turns the records the fit uses into its schema v1). Every line
carries the schema version it was written in (:data:`SCHEMA_VERSION`, key ``v``); a reader refuses
a line of another version with one line naming the fix. A line without ``v`` was written before
the version was written, in version 1.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from typing import Any, ClassVar, Self

from pydantic import TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

#: The telemetry schema version every line is written in and every reader checks.
SCHEMA_VERSION = 1
#: The key that carries it.
VERSION_KEY = "v"


def check_version(obj: Mapping[str, Any]) -> None:
    """A line of a version this reader does not read is refused (a line without one is version 1)."""
    version = obj.get(VERSION_KEY, SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise ValueError(f"{VERSION_KEY}: telemetry schema version {version!r}; this spotgpu reads version "
                         f"{SCHEMA_VERSION}; fix: read it with the spotgpu release that wrote it")  # fmt: skip


class FailureReason(StrEnum):
    """Why a launch failed, kept apart so capacity is never confused with quota."""

    CAPACITY = "capacity"
    QUOTA = "quota"
    PRICE = "price"
    OTHER = "other"


@dataclasses.dataclass(frozen=True)
class Fields:
    """The fields of one record kind, as its producer writes them (``KIND``); the wire keys are camelCase.

    ``RENAMED`` gives a field another key (``from`` is a Python keyword); ``SNAKE_KEYS`` keeps the
    fields' own names (the VM identity's labels); ``OMITTED_WHEN_NONE`` names fields written only when
    set; a field named ``detail`` is written flat beside the others (a record that carries another
    record's fields: a controller action, a dry run's event).
    """

    KIND: ClassVar[StrEnum]
    RENAMED: ClassVar[Mapping[str, str]] = {}
    SNAKE_KEYS: ClassVar[bool] = False
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def key(cls, name: str) -> str:
        return cls.RENAMED.get(name, name if cls.SNAKE_KEYS else to_camel(name))

    def to_fields(self) -> dict[str, Any]:
        """The record's fields as written (the producer adds its kind, time and version)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "detail":
                out.update(value)
            elif value is not None or f.name not in self.OMITTED_WHEN_NONE:
                out[self.key(f.name)] = value
        return out

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Self:
        """Read the fields back; one the kind does not declare, or a value of the wrong type, raises ValueError."""
        names = {cls.key(f.name): f.name for f in dataclasses.fields(cls) if f.name != "detail"}
        values: dict[str, Any] = {}
        detail: dict[str, Any] = {}
        for key, value in fields.items():
            if key in names:
                values[names[key]] = value
            elif any(f.name == "detail" for f in dataclasses.fields(cls)):
                detail[key] = value
            else:
                raise ValueError(f"{cls.KIND.value}.{key}: not a field of a {cls.KIND.value} record "
                                 f"(fields: {', '.join(sorted(names))})")  # fmt: skip
        if detail:
            values["detail"] = detail
        try:
            made: Self = _adapter(typing.cast(type, cls)).validate_python(values)
            return made
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(cls.key(str(p)) for p in first["loc"])
            raise ValueError(f"{cls.KIND.value}.{where}: {first['msg']} (value: {first.get('input')!r})") from None


@cache
def _adapter(cls: type[Fields]) -> TypeAdapter[Any]:
    return TypeAdapter(cls)


def kinds_of(base: type[Fields]) -> dict[StrEnum, type[Fields]]:
    """Every record class below ``base`` by its kind (each kind has exactly one)."""
    found: dict[StrEnum, type[Fields]] = {}
    todo = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "KIND" in cls.__dict__:
            if cls.KIND in found:
                raise TypeError(f"two record classes for {cls.KIND!r}: {found[cls.KIND].__name__}, {cls.__name__}")
            found[cls.KIND] = cls
    return found


def field_types(cls: type[Fields]) -> dict[str, Any]:
    """The resolved type of each field (for a reader's or a test's own use)."""
    return typing.get_type_hints(cls)
