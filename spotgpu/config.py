"""Parse stack config into models once, and turn failures into one actionable line.

Every error is one line in one style::

    spotgpu:pools[vision-gcp].zones: <what is wrong> (value: <value>); fix: <how>

naming the key path as the user wrote it (list items that have a ``name`` are
shown by name, others by index), the offending value and the fix. Unknown keys
get a "did you mean". Pulumi hands structured config to the program as JSON
strings; :func:`parse_stack_config` accepts either form. YAML and file-level
problems (syntax, tabs, a key without namespace) are :class:`ConfigError` too, so
every command can print ``str(err)`` and exit 2.
"""

from __future__ import annotations

import difflib
import json
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from spotgpu.catalogue import CLOUDS
from spotgpu.models.base import FieldProblem
from spotgpu.models.stack import StackConfig
from spotgpu.models.urls import redact

#: Config keys the stack program reads, in the project namespace.
STACK_KEYS = ("environment", "owner", "workloads", "ladders", "pools")

#: Provider config keys validation reads (regions the pools must live in).
PROVIDER_KEYS = ("aws:region", "gcp:region", "gcp:project", "azure-native:location")

#: The clouds as a fix names them: "aws, gcp or azure".
_CLOUD_CHOICE = f"{', '.join(CLOUDS[:-1])} or {CLOUDS[-1]}"

_GENERIC_FIX = {
    "list_type": "write it as a YAML list, e.g. [a, b]",
    "tuple_type": "write it as a YAML list, e.g. [a, b]",
    "dict_type": "write it as a YAML mapping of name: value",
    "model_type": "write it as a YAML mapping of key: value",
    "model_attributes_type": "write it as a YAML mapping of key: value",
    "extra_forbidden": "remove the key or fix its spelling",
    "missing": "add the key",
    "int_parsing": "use a whole number",
    "int_from_float": "use a whole number",
    "int_type": "use a whole number",
    "float_parsing": "use a number",
    "float_type": "use a number",
    "bool_parsing": "use true or false",
    "bool_type": "use true or false",
    "string_type": "use a string",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than": "use a smaller value",
    "less_than_equal": "use a smaller value",
    "too_short": "add more items",
    "too_long": "remove items",
    "string_too_short": "write a longer value",
    "string_pattern_mismatch": "match the documented format",
    "literal_error": "use one of the allowed values",
    "enum": "use one of the allowed values",
    "union_tag_invalid": f"set cloud to {_CLOUD_CHOICE}",
    "union_tag_not_found": f"add cloud: {_CLOUD_CHOICE}",
}

_MESSAGES = {
    "missing": "required key is missing",
    "extra_forbidden": "unknown key",
}

#: Shown for a key whose real value is withheld (a mapping, a secret).
_ELIDED = "{...}"


class ConfigError(ValueError):
    """A stack config problem, already formatted as one line for the user (exit 2)."""


def _show(value: Any) -> str:
    """The value as the message shows it: a mapping elided, a URL's credentials redacted, long text cut."""
    if isinstance(value, dict):
        return _ELIDED
    shown = redact(json.dumps(value, default=str))
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _item_label(container: Any, index: int) -> str:
    """``[vision-gcp]`` for a list item with a string ``name``, else ``[2]``."""
    if isinstance(container, list | tuple) and 0 <= index < len(container):
        item = container[index]
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
            return f"[{item['name']}]"
    return f"[{index}]"


def key_parts(loc: tuple[int | str, ...], data: Any = None) -> list[str]:
    """A pydantic location as the key's parts, ``["pools", "[vision-gcp]", "zones"]``: list items
    that have a ``name`` by name, others by index, stepping over the union tags pydantic inserts."""
    parts: list[str] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(part, int):
            parts.append(_item_label(node, part))
            node = node[part] if isinstance(node, list | tuple) and 0 <= part < len(node) else None
            continue
        if part in CLOUDS and i > 0 and isinstance(loc[i - 1], int):
            continue  # discriminated-union tag pydantic inserts into the location
        parts.append(part)
        node = node.get(part) if isinstance(node, dict) else None
    return parts


_AT_PART = re.compile(r"\[[^\]]*\]|[^.\[]+")


def at_parts(at: str) -> list[str]:
    """A :class:`~spotgpu.models.base.FieldProblem`'s ``at`` (``capacity.fallbackMax``, ``[2]``,
    ``pools[x].subnets``) as key parts."""
    return _AT_PART.findall(at)


@dataclass(frozen=True)
class KeyPaths:
    """How a message names a key: as the user wrote it, wherever that was.

    A stack file writes ``spotgpu:pools[train].zones`` (``root`` is the config namespace). A packaged
    component (``spotgpu_pulumi.package``) takes one pool's keys as its args, under its resource name,
    so the same key reads ``train.zones``, and the pool's workload and ladder ``train.workload.workHours``
    and ``train.ladder.steps[0].kind`` (``component`` true, ``root`` the resource name). Every error line,
    the models' and the planners' alike, is rendered through one of these, never rewritten afterwards.
    """

    root: str = "spotgpu"
    component: bool = False

    def path(self, parts: list[str]) -> str:
        """The key named by ``parts`` (see :func:`key_parts`)."""
        if self.component:
            if parts[:1] == ["pools"] and parts[1:2] and parts[1].startswith("["):
                parts = parts[2:]  # the component is the pool
            elif parts[:1] in (["workloads"], ["ladders"]) and len(parts) >= 2:
                parts = [parts[0].removesuffix("s"), *parts[2:]]  # its one workload, its one ladder
            return self.root + "".join(p if p.startswith("[") else f".{p}" for p in parts)
        path = ""
        for i, part in enumerate(parts):
            path += part if part.startswith("[") else f"{self.root}:{part}" if i == 0 else f".{part}"
        return path or f"{self.root}:<root>"

    @property
    def top(self) -> str:
        """What a top-level key is written after (``spotgpu:`` in a stack file)."""
        return f"{self.root}." if self.component else f"{self.root}:"

    @staticmethod
    def pool(name: str) -> list[str]:
        """The parts of a pool's own key."""
        return ["pools", f"[{name}]"]


def _keys(namespace: str | KeyPaths) -> KeyPaths:
    return namespace if isinstance(namespace, KeyPaths) else KeyPaths(namespace)


def problem_line(keys: KeyPaths, parts: list[str], problem: FieldProblem) -> str:
    """One line for a finding: ``<key>: <what> (value: <value>); fix: <fix>``, its ``at`` below ``parts``."""
    return f"{keys.path(parts + at_parts(problem.at))}: {problem.what} (value: {_show(problem.value)}); fix: {problem.fix}"


def one_line(lines: list[str]) -> str:
    """The first problem is what the user reads first; the others follow on the same line."""
    return lines[0] if len(lines) == 1 else lines[0] + f" [and {len(lines) - 1} more: " + "; ".join(lines[1:]) + "]"


class PlanError(ConfigError):
    """A pool a planner refuses, as the findings that say why: every planner raises this, and only this.

    Each :class:`~spotgpu.models.base.FieldProblem`'s ``at`` is below the pool's key (``zones``,
    ``gang.rendezvous.zone``), or below the stack's root when ``pool`` is None (a workload's key).
    ``str()`` is the line in a stack file's terms; :meth:`render` names the keys as any
    :class:`KeyPaths` does (the preview edge under its namespace, a packaged component under its name).
    """

    def __init__(self, *problems: FieldProblem, pool: str | None = None) -> None:
        if not problems:
            raise TypeError("PlanError needs at least one FieldProblem")
        self.problems = problems
        self.pool = pool
        super().__init__(self.render(KeyPaths()))

    def render(self, keys: KeyPaths) -> str:
        base = KeyPaths.pool(self.pool) if self.pool is not None else []
        return one_line([problem_line(keys, base, problem) for problem in self.problems])


def _union_members(annotation: Any) -> dict[str, type[BaseModel]]:
    """Tag -> member of a tagged union (pool specs by ``cloud``, notices by ``provider``), read from
    the annotation itself, so the stack's and the controller's pool unions each list their own keys."""
    members: dict[str, type[BaseModel]] = {}
    for arg in typing.get_args(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            for tag_field in ("cloud", "provider"):
                field = arg.model_fields.get(tag_field)
                if field is not None and typing.get_origin(field.annotation) is typing.Literal:
                    members.update((str(tag), arg) for tag in typing.get_args(field.annotation))
        else:
            members.update(_union_members(arg))
    return members


def _lookup(model: Any, key: int | str) -> Any:
    if not (isinstance(model, type) and issubclass(model, BaseModel)) or isinstance(key, int):
        return None
    return next((f for name, f in model.model_fields.items() if key in (name, f.alias)), None)


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> Any:
    """The model class ``loc`` points at, stepping over list indices, mapping keys
    (workload and ladder names) and the union tag pydantic inserts for pool specs."""
    current: Any = model
    union: dict[str, type[BaseModel]] = {}
    skip_mapping_key = False
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        if skip_mapping_key:
            skip_mapping_key = False
            continue
        if part in union and i > 0 and isinstance(loc[i - 1], int):
            current = union[part]
            continue
        field = _lookup(current, part)
        if field is None:
            return None
        skip_mapping_key = typing.get_origin(field.annotation) is dict
        union = _union_members(field.annotation)
        current = _inner_model(field.annotation)
    return current


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _field_fix(model: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """The field's own ``fix`` hint (``fix_hint``), if the location names a known field."""
    if not loc:
        return None
    field = _lookup(_model_at(model, loc[:-1]), loc[-1])
    extra = getattr(field, "json_schema_extra", None)
    hint = extra.get("fix") if isinstance(extra, dict) else None
    return hint if isinstance(hint, str) else None


def _known_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the YAML may use next to the last key of ``loc`` (camelCase aliases)."""
    holder = _model_at(model, loc[:-1])
    if not (isinstance(holder, type) and issubclass(holder, BaseModel)):
        return []
    return [f.alias or name for name, f in holder.model_fields.items()]


def did_you_mean(word: str, known: list[str] | tuple[str, ...]) -> str | None:
    """The closest known key, case-insensitively, or None when nothing is close."""
    lowered = {k.lower(): k for k in known}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def _line(e: Any, keys: KeyPaths, model: type[BaseModel], data: Any) -> str:
    loc = tuple(e["loc"])
    etype = e["type"]
    parts = key_parts(loc, data)
    path = keys.path(parts)
    problem = (e.get("ctx") or {}).get("error")
    if isinstance(problem, FieldProblem):
        return problem_line(keys, parts, problem)
    shown = "not set" if etype == "missing" else _show(e.get("input"))
    if etype in ("union_tag_invalid", "union_tag_not_found"):
        ctx = e.get("ctx") or {}
        path = keys.path([*parts, ctx.get("discriminator", "cloud").strip(chr(39))])
        shown = _show(ctx["tag"]) if "tag" in ctx else "not set"
        return f"{path}: names no cloud spotgpu builds (value: {shown}); fix: set cloud to {_CLOUD_CHOICE}"
    if etype in ("value_error", "assertion_error"):
        msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        what, sep, fix = msg.partition("; ")
        if not sep:
            fix = _field_fix(model, loc) or "see docs/configuration.md"
        return f"{path}: {what} (value: {shown}); fix: {fix}"
    msg = _MESSAGES.get(etype, e["msg"].replace("valid tuple", "list").replace("Tuple should", "List should"))
    if etype == "too_short" and e.get("input") in ([], (), {}):
        msg = "is empty"
    fix = _field_fix(model, loc) or _GENERIC_FIX.get(etype, "see docs/configuration.md")
    if etype == "extra_forbidden" and loc:
        known = _known_keys(model, loc)
        guess = did_you_mean(str(loc[-1]), known)
        prefix = keys.top if len(loc) == 1 else ""
        if guess is not None:
            fix = f"did you mean {prefix}{guess}? rename the key (unknown keys are errors, not ignored)"
        elif known:
            fix = f"remove the key or fix its spelling; known keys: {', '.join(prefix + k for k in known)}"
    return f"{path}: {msg} (value: {shown}); fix: {fix}"


def _echo(error: Any, failed: list[tuple[Any, ...]]) -> bool:
    """A list's "too short" error when one of its own items failed: that item is the whole story
    (a misspelt key in the only pool fails the pool, and pydantic then also reports ``pools`` empty)."""
    loc = tuple(error["loc"])
    return error["type"] == "too_short" and any(len(f) > len(loc) and f[: len(loc)] == loc for f in failed)


def format_error(
    err: ValidationError,
    namespace: str | KeyPaths = "spotgpu",
    model: type[BaseModel] = StackConfig,
    data: Any = None,
) -> str:
    """One line for every problem; the first problem is what the user reads first.

    ``namespace`` names the keys (a stack's config namespace, or :class:`KeyPaths` for keys
    written elsewhere). ``data`` is the validated input: with it, list items that have a ``name``
    (pools) are shown by name. A required key that is missing only because it was
    misspelt is reported once, as the misspelt key with its "did you mean".
    """
    keys = _keys(namespace)
    errors = list(err.errors())
    guessed: set[tuple[Any, ...]] = set()
    for e in errors:
        loc = tuple(e["loc"])
        if e["type"] == "extra_forbidden" and loc:
            guess = did_you_mean(str(loc[-1]), _known_keys(model, loc))
            if guess is not None:
                guessed.add((*loc[:-1], guess))
    failed = [tuple(e["loc"]) for e in errors]
    kept = [
        e for e in errors
        if not (e["type"] == "missing" and tuple(e["loc"]) in guessed) and not _echo(e, failed)
    ] or errors  # fmt: skip
    kept.sort(key=lambda e: e["type"] != "extra_forbidden")
    return one_line([_line(e, keys, model, data) for e in kept])


def _decode(value: Any) -> Any:
    """Pulumi passes structured config as JSON text; plain strings stay strings."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def parse_stack_config(
    raw: Mapping[str, Any],
    namespace: str | KeyPaths = "spotgpu",
    provider: Mapping[str, Any] | None = None,
    project_dir: str | None = None,
) -> StackConfig:
    """Validate a ``{key: value}`` mapping (keys without namespace) into a StackConfig.

    ``namespace`` names the keys in its errors (:func:`format_error`).

    ``provider`` carries the provider keys (``aws:region`` ...) the pools must agree with;
    ``project_dir`` is where a workload's ``measuredProfile`` path is relative to (default:
    the current directory, which is the project directory when Pulumi runs the program).
    """
    data = {k: _decode(v) for k, v in raw.items() if v is not None}
    context = {
        "provider": {k: v for k, v in (provider or {}).items() if isinstance(v, str)},
        # In a stack, a workload may leave onDemandPerHour out: each pool prices it from the catalogue.
        "catalogue_prices": True,
        "project_dir": project_dir,
    }
    try:
        return StackConfig.model_validate(data, context=context)
    except ValidationError as err:
        raise ConfigError(format_error(err, namespace, data=data)) from None


def stack_config_from_engine(
    engine: Mapping[str, Any], namespace: str = "spotgpu", project_dir: str | None = None
) -> StackConfig:
    """Validate every ``<namespace>:*`` key of an engine config map (``{"ns:key": json-or-text}``).

    All keys of the namespace are passed, not only the known ones, so a misspelt
    key is an error with a "did you mean" instead of being ignored. An optional
    ``<namespace>:clouds`` keeps only the pools of those clouds (validated and built
    alike), so a stack made from the template can start on one cloud and add the
    others later without deleting their pool entries.
    """
    prefix = f"{namespace}:"
    misplaced = misplaced_keys(engine, namespace)
    if misplaced:
        key, wanted = misplaced[0]
        raise ConfigError(
            f"{key}: not read, spotgpu reads its keys under {namespace}: (value: {_show(_decode(engine[key]))}); "
            f"fix: did you mean {wanted}? rename it (`pulumi config set {wanted} ...` then `pulumi config rm {key}`; "
            f"a bare `pulumi config set {key.split(':', 1)[1]}` writes the project's own namespace)"
        )
    project = {k[len(prefix) :]: v for k, v in engine.items() if k.startswith(prefix)}
    clouds = select_clouds(project.pop("clouds", None), namespace)
    if clouds is not None:
        pools = _decode(project.get("pools"))
        if isinstance(pools, list):
            project["pools"] = [p for p in pools if not isinstance(p, dict) or p.get("cloud") in clouds]
    provider = {k: engine[k] for k in PROVIDER_KEYS if k in engine}
    return parse_stack_config(project, namespace, provider, project_dir)


def misplaced_keys(engine: Mapping[str, Any], namespace: str = "spotgpu") -> list[tuple[str, str]]:
    """``[(acme:owner, spotgpu:owner)]``: a spotgpu key set under another namespace, its own unset.

    ``pulumi config set owner x`` in project ``acme`` writes ``acme:owner``, which the
    ``spotgpu:`` reader would otherwise never see (and then report ``owner`` missing).
    Provider namespaces (``aws:``, ``gcp:`` ...) carry none of these names.
    """
    names = (*STACK_KEYS, "clouds")
    found = []
    for key in sorted(engine):
        space, _, name = key.partition(":")
        wanted = f"{namespace}:{name}"
        if space != namespace and name in names and wanted not in engine:
            found.append((key, wanted))
    return found


def select_clouds(value: Any, namespace: str = "spotgpu", field: str | None = None) -> frozenset[str] | None:
    """Parse ``clouds`` (comma-separated, or a list / JSON list); ``None`` or empty keeps every pool.

    ``field``: how the error names the value (a CLI flag); default the config key ``namespace:clouds``.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    decoded = _decode(value.strip()) if isinstance(value, str) else value
    names = decoded if isinstance(decoded, list) else [c.strip() for c in str(decoded).split(",")]
    unknown = [c for c in names if c not in CLOUDS]
    if unknown or not names:
        raise ConfigError(
            f"{field or f'{namespace}:clouds'}: names no cloud or an unknown one {unknown or names} (value: {value!r}); "
            f"fix: use a comma-separated subset of {', '.join(CLOUDS)}"
        )
    return frozenset(names)


def _yaml_error(path: str, err: Exception) -> ConfigError:
    """A YAML parse failure as one line: file:line:col, what, and the fix."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
    problem = str(getattr(err, "problem", None) or err).splitlines()[0]
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and context_mark is not None:
        problem += f" ({context} that starts at line {context_mark.line + 1} column {context_mark.column + 1})"
    snippet = ""
    if mark is not None and getattr(mark, "buffer", None):
        lines = str(mark.buffer).rstrip("\0").splitlines()
        snippet = lines[mark.line] if mark.line < len(lines) else ""
    if "\t" in problem or "'\\t'" in problem:
        fix = "indent with spaces; YAML does not allow tabs for indentation"
    else:
        fix = "correct the YAML at that line (quote values that contain ': ', ' #', '[', '{' or start with '*', '&', '!')"
    return ConfigError(f"{where}: YAML syntax error: {problem} (value: {_show(snippet.strip())}); fix: {fix}")


def _strict_loader() -> type:
    """A SafeLoader that refuses duplicate keys, as the Pulumi CLI's YAML parser does."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise _DuplicateKey(key_node, f"a mapping key must be a plain scalar, not {type(key).__name__}",
                                    key, "write the key as a plain word")
            if key in out:
                raise _DuplicateKey(key_node, "key is given twice in one mapping", key,
                                    "keep one of the two entries (YAML would silently drop the first)")
            out[key] = loader.construct_object(value_node, deep=deep)
        return out

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return StrictLoader


class _DuplicateKey(Exception):
    def __init__(self, node: Any, what: str, key: Any, fix: str) -> None:
        super().__init__(what)
        self.mark = node.start_mark
        self.what = what
        self.key = key
        self.fix = fix


def load_stack_yaml(path: str, text: str | None = None) -> dict[str, Any]:
    """Parse a stack file; every YAML problem becomes one :class:`ConfigError` line."""
    import yaml

    if text is None:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"{path}: cannot read the stack file ({err}); fix: check the path and that it is UTF-8 text") from None
    try:
        doc = yaml.load(text, Loader=_strict_loader())  # a SafeLoader subclass
    except _DuplicateKey as dup:
        raise ConfigError(
            f"{path}:{dup.mark.line + 1}:{dup.mark.column + 1}: {dup.what} (value: {_show(dup.key)}); fix: {dup.fix}"
        ) from None
    except yaml.YAMLError as err:
        raise _yaml_error(path, err) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(
            f"{path}: a stack file must be a mapping with a config: key (value: {_show(doc)}); "
            "fix: start the file with 'config:' and indent the keys under it"
        )
    return doc


def read_stack_file(path: str, text: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Read ``Pulumi.<stack>.yaml`` into (project keys, all keys as the engine passes them).

    The second mapping is ``{"ns:key": str}`` exactly as the Pulumi engine gives
    config to a program: objects and lists JSON-encoded, scalars as strings.
    """
    doc = load_stack_yaml(path, text)
    config = doc.get("config")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ConfigError(
            f"config: must be a mapping of namespace:key: value (value: {_show(config)}); "
            f"fix: write each setting as an indented 'spotgpu:key: value' line under config: in {path}"
        )
    engine: dict[str, str] = {}
    for key, value in config.items():
        if not isinstance(key, str) or ":" not in key:
            raise ConfigError(
                f"{key}: config key has no namespace (value: {_show(value)}); "
                f"fix: write it as spotgpu:{key} in {path}"
            )
        if isinstance(value, dict) and "secure" in value:
            engine[key] = "[secret]"
            continue
        engine[key] = value if isinstance(value, str) else json.dumps(value, default=str)
    project = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("spotgpu:")}
    return project, engine
