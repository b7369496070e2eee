"""Parse stack config into models once, and turn failures into one actionable line.

Every error names the key path as the user wrote it (``spotgpu:pools[0].zones``),
the offending value, and how to fix it. Pulumi hands structured config to the
program as JSON strings; :func:`parse_stack_config` accepts either form.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from spotgpu.models.stack import StackConfig

#: Config keys the stack program reads, in the project namespace.
STACK_KEYS = ("environment", "owner", "workloads", "ladders", "pools")

_GENERIC_FIX = {
    "list_type": "write it as a YAML list, e.g. [a, b]",
    "tuple_type": "write it as a YAML list, e.g. [a, b]",
    "dict_type": "write it as a YAML mapping of name: value",
    "extra_forbidden": "remove the key or fix its spelling",
    "missing": "add the key",
    "int_parsing": "use a whole number",
    "int_from_float": "use a whole number",
    "float_parsing": "use a number",
    "bool_parsing": "use true or false",
    "string_type": "use a string",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than": "use a smaller value",
    "less_than_equal": "use a smaller value",
    "too_short": "add more items",
    "string_pattern_mismatch": "match the documented format",
    "literal_error": "use one of the allowed values",
    "enum": "use one of the allowed values",
    "union_tag_invalid": "set cloud to aws, gcp or azure",
    "union_tag_not_found": "add cloud: aws, gcp or azure",
}


class ConfigError(ValueError):
    """A stack config problem, already formatted as one line for the user."""


def _loc_to_path(namespace: str, loc: tuple[int | str, ...]) -> str:
    path = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        elif i == 0:
            path = f"{namespace}:{part}"
        elif part in ("aws", "gcp", "azure") and i > 0 and isinstance(loc[i - 1], int):
            continue  # discriminated-union tag pydantic inserts into the location
        else:
            path += f".{part}"
    return path or f"{namespace}:<root>"


def _field_fix(model: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """Walk the model along ``loc`` to the field's own ``fix`` hint, if any.

    List indices, mapping keys (workload and ladder names) and the union tag that
    pydantic inserts for discriminated pool specs are stepped over. An unknown
    key has no field, so it gets no field hint (the generic one applies).
    """
    import typing

    from spotgpu.models.pools import AwsPoolSpec, AzurePoolSpec, GcpPoolSpec

    union_members = {"aws": AwsPoolSpec, "gcp": GcpPoolSpec, "azure": AzurePoolSpec}
    current: Any = model
    fix: str | None = None
    skip_mapping_key = False
    for part in loc:
        if isinstance(part, int):
            continue
        if skip_mapping_key:
            skip_mapping_key = False
            continue
        if part in union_members and current is AwsPoolSpec:
            current = union_members[str(part)]
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = next((f for name, f in current.model_fields.items() if part in (name, f.alias)), None)
        if field is None:
            return None
        extra = field.json_schema_extra
        hint = extra.get("fix") if isinstance(extra, dict) else None
        fix = hint if isinstance(hint, str) else None
        skip_mapping_key = typing.get_origin(field.annotation) is dict
        current = _inner_model(field.annotation)
    return fix


def _inner_model(annotation: Any) -> Any:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def format_error(err: ValidationError, namespace: str = "spotgpu", model: type[BaseModel] = StackConfig) -> str:
    """One line per problem; the first problem is what the user sees first."""
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        path = _loc_to_path(namespace, loc)
        value = e.get("input")
        shown = json.dumps(value, default=str) if not isinstance(value, dict) else "{...}"
        if len(shown) > 80:
            shown = shown[:77] + "..."
        msg = e["msg"].removeprefix("Value error, ").replace("valid tuple", "list")
        fix = _field_fix(model, loc) or _GENERIC_FIX.get(e["type"], "see docs/configuration.md")
        if e["type"] == "value_error":
            # Our own validators already say what to do.
            lines.append(f"{path}: {msg} (value: {shown})")
        else:
            lines.append(f"{path}: {msg} (value: {shown}); fix: {fix}")
    return lines[0] if len(lines) == 1 else lines[0] + f" [and {len(lines) - 1} more: " + "; ".join(lines[1:]) + "]"


def _decode(value: Any) -> Any:
    """Pulumi passes structured config as JSON text; plain strings stay strings."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def parse_stack_config(raw: dict[str, Any], namespace: str = "spotgpu") -> StackConfig:
    """Validate a ``{key: value}`` mapping (keys without namespace) into a StackConfig."""
    data = {k: _decode(v) for k, v in raw.items() if v is not None}
    try:
        return StackConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_error(err, namespace)) from None


def read_stack_file(path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Read ``Pulumi.<stack>.yaml`` into (project keys, all keys as the engine passes them).

    The second mapping is ``{"ns:key": str}`` exactly as the Pulumi engine gives
    config to a program: objects and lists JSON-encoded, scalars as strings.
    """
    import yaml

    with open(path, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh) or {}
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: config must be a mapping of key: value")
    engine: dict[str, str] = {}
    for key, value in config.items():
        if ":" not in key:
            raise ConfigError(f"{path}: config key {key!r} has no namespace; write it as spotgpu:{key}")
        if isinstance(value, dict) and "secure" in value:
            engine[key] = "[secret]"
            continue
        engine[key] = value if isinstance(value, str) else json.dumps(value)
    project = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("spotgpu:")}
    return project, engine
