"""How the contract reads one field of a JSON document: a reader per JSON type, one error line.

Every ``from_json`` in the contract reads its keys through these, so a document that is not one
fails the same way whichever part wrote it, in one line naming the field and the value:
``{what}.{key}: not {wanted} (value: {value!r})``, and ``; fix: {fix}`` where the reader knows
what the writer should send instead (the form of ``spotgpu.config``'s lines).

A key left out and a key that is ``null`` read the same: absent (None), or this error where the
field is required. A bool is never a number (JSON's ``true`` is Python's ``1``), and NaN and the
infinities are no numbers (Python's json reads ``NaN`` and ``Infinity``). A number is any real
(``numbers.Real``: a numpy scalar a caller passes too) and is read back as a plain float or int.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal, TypeVar, overload

Doc = Mapping[str, Any]
E = TypeVar("E", bound=StrEnum)


def problem(where: str, wanted: str, value: object, fix: str | None = None) -> ValueError:
    """The one error: ``{where}: not {wanted} (value: {value!r})``, then ``; fix: {fix}`` if given."""
    line = f"{where}: not {wanted} (value: {value!r})"
    return ValueError(line if fix is None else f"{line}; fix: {fix}")


def document(value: object, what: str) -> dict[str, Any]:
    """``value`` if it is a JSON object; anything else raises naming ``what``."""
    if not isinstance(value, dict):
        raise problem(what, "a JSON object", value)
    return value


@overload
def text(
    doc: Doc, key: str, what: str, *, required: Literal[True], wanted: str = ..., fix: str | None = ...
) -> str: ...
@overload
def text(
    doc: Doc, key: str, what: str, *, required: bool = ..., wanted: str = ..., fix: str | None = ...
) -> str | None: ...
def text(doc: Doc, key: str, what: str, *, required: bool = False, wanted: str = "a string",
         fix: str | None = None) -> str | None:  # fmt: skip
    """``doc[key]``, a string."""
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise problem(f"{what}.{key}", wanted, value, fix)
    return value


@overload
def number(doc: Doc, key: str, what: str, *, required: Literal[True], above: float | None = ...,
           least: float | None = ..., wanted: str = ..., fix: str | None = ...) -> float: ...  # fmt: skip
@overload
def number(doc: Doc, key: str, what: str, *, required: bool = ..., above: float | None = ...,
           least: float | None = ..., wanted: str = ..., fix: str | None = ...) -> float | None: ...  # fmt: skip
def number(doc: Doc, key: str, what: str, *, required: bool = False, above: float | None = None,
           least: float | None = None, wanted: str | None = None, fix: str | None = None) -> float | None:  # fmt: skip
    """``doc[key]``, a finite number (strictly above ``above``, at least ``least``, when given), as a float."""
    value = doc.get(key)
    if value is None and not required:
        return None
    real = _real(value)
    if not math.isfinite(real) or (above is not None and real <= above) or (least is not None and real < least):
        default = ("a number" if above is None and least is None else
                   f"a finite number above {above:g}" if above is not None else f"a number of at least {least:g}")  # fmt: skip
        raise problem(f"{what}.{key}", wanted or default, value, fix)
    return real


@overload
def epoch(doc: Doc, key: str, what: str, *, required: Literal[True]) -> float: ...
@overload
def epoch(doc: Doc, key: str, what: str, *, required: bool = ...) -> float | None: ...
def epoch(doc: Doc, key: str, what: str, *, required: bool = False) -> float | None:
    """``doc[key]``, a time in epoch seconds (a finite number), as a float."""
    return number(doc, key, what, required=required, wanted="a time in epoch seconds")


def whole(doc: Doc, key: str, what: str, *, least: int | None = None, fix: str | None = None) -> int | None:
    """``doc[key]``, a whole number (of at least ``least`` when given), as an int; absent: None."""
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or (least is not None and value < least):
        wanted = "a whole number" if least is None else f"a whole number of at least {least}"
        raise problem(f"{what}.{key}", wanted, value, fix)
    return int(value)


def choice(doc: Doc, key: str, what: str, values: type[E], wanted: str | None = None, fix: str | None = None) -> E:
    """``doc[key]``, one of the enum's values (required), as its member; ``wanted`` names the set
    (default: ``one of`` its values)."""
    value = doc.get(key)
    if value not in tuple(values):
        raise problem(f"{what}.{key}", wanted or f"one of {', '.join(values)}", value, fix)
    return values(value)


def flag(doc: Doc, key: str, what: str) -> bool:
    """``doc[key]``, true or false; required (a flag left out says nothing)."""
    value = doc.get(key)
    if not isinstance(value, bool):
        raise problem(f"{what}.{key}", "true or false", value)
    return value


def mapping(doc: Doc, key: str, what: str) -> dict[str, Any] | None:
    """``doc[key]``, a JSON object; absent: None."""
    value = doc.get(key)
    if value is not None and not isinstance(value, dict):
        raise problem(f"{what}.{key}", "a JSON object", value)
    return value


def items(doc: Doc, key: str, what: str, *, wanted: str = "a list", of: type | None = None) -> list[Any] | None:
    """``doc[key]``, a JSON list (of ``of`` values when given; a bool is no int); absent: None."""
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or (of is not None and not all(_is(each, of) for each in value)):
        raise problem(f"{what}.{key}", wanted, value)
    return value


def _real(value: object) -> float:
    """``value`` as a float; NaN when it is no real number (a bool, a string, an int past a float's range)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.nan


def _is(value: object, kind: type) -> bool:
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


__all__ = ["Doc", "choice", "document", "epoch", "flag", "items", "mapping", "number", "problem", "text", "whole"]
