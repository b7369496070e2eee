"""Ids of existing infrastructure: a plain string checked here, or a deferred value passed through.

A subnet, security group, network or image usually comes from another resource
or a ``StackReference`` (a ``pulumi.Output``). This package never imports
pulumi, so it cannot name that type: a plain value (str, number, list, mapping,
None) is validated as before, with the same error types and fix hints, and any
other object (an Output, an awaitable) is passed through untouched for the
components to hand to the provider, which checks it when the value is known.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

from pydantic import PlainSerializer, PlainValidator
from pydantic_core import PydanticCustomError

#: What YAML or JSON config can produce: validated, never passed through.
_PLAIN = (str, bytes, int, float, bool, list, tuple, dict, set, type(None))


@runtime_checkable
class Deferred(Protocol):
    """A value known later (``pulumi.Output`` has ``apply``); only the components unwrap it."""

    def apply(self, func: Any, /, *args: Any, **kwargs: Any) -> Any: ...


def is_deferred(value: object) -> bool:
    """True for a value that is not plain config (an Output): it is passed through unchecked."""
    return not isinstance(value, _PLAIN)


#: A config value naming existing infrastructure: the id itself, or a value known later.
Ref = str | Deferred


def _check(pattern: str | None, value: object) -> object:
    if isinstance(value, str):
        if pattern is not None and not re.fullmatch(pattern, value):  # fullmatch: "$" alone lets "x\n" through
            raise PydanticCustomError(
                "string_pattern_mismatch", "String should match pattern '{pattern}'", {"pattern": pattern}
            )
        return value
    if not is_deferred(value):
        raise PydanticCustomError("string_type", "Input should be a valid string")
    return value


def ref_check(pattern: str | None = None) -> PlainValidator:
    """Validator for a :data:`Ref` field: ``pattern`` applies to plain strings only.

    Use as ``Annotated[Ref, ref_check(r"^subnet-..."), REF_SERIALIZER]``; the
    error types are pydantic's own (``string_pattern_mismatch``, ``string_type``),
    so ``spotgpu.config.format_error`` prints the field's fix hint as before.
    """
    return PlainValidator(lambda value: _check(pattern, value), json_schema_input_type=str)


#: Dumps a deferred value as its repr (config dumps are for people; the components use the object).
REF_SERIALIZER = PlainSerializer(lambda value: value if isinstance(value, str) else repr(value), return_type=str)
