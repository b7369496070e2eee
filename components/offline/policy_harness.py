"""Offline ``pulumi preview --policy-pack``: run a CrossGuard pack over recorded resources.

The Pulumi CLI cannot run here, so this module plays the engine's part against
the pack's own analyzer: ``pulumi_policy.policy._PolicyAnalyzerServicer``, the
object the CLI talks to over gRPC. It is private API, so pulumi-policy is pinned
(==1.21.0) and this is the only module that touches it.

Loading the pack the way the CLI does: the CLI runs ``python -m pulumi.policy
ENGINE PACK_DIR``, i.e. ``runpy.run_path(PACK_DIR)``, and ``PolicyPack(...)`` then
serves gRPC and sleeps forever. :func:`load_pack` runs the same ``__main__.py``
with the same ``runpy.run_path`` (so the pack directory is ``sys.path[0]`` and its
imports resolve exactly as under the CLI) while ``pulumi_policy.PolicyPack`` is
swapped for a recorder that keeps the constructor arguments instead of serving.
The servicer is then built from those arguments, as ``PolicyPack.__init__``
does, with the version read from ``PulumiPolicy.yaml`` (the only version source
for Python packs).

Then, as the engine does: Configure (every policy's level from its default, the
config's ``all`` and its own entry; properties from schema defaults overlaid by
the config, validated against the schema), Analyze each resource with its
inputs, AnalyzeStack once with every resource's outputs (the mock provider's
outputs: inputs plus computed names and ids, see ``mocks.fake_outputs``) and
its parent and (property) dependencies, and collect the diagnostics.
"""

from __future__ import annotations

import json
import runpy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import jsonschema
import pulumi_policy
import pulumi_policy.policy as policy_module
import yaml
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as proto
from pulumi_policy import EnforcementLevel, Policy

from spotgpu_pulumi.offline.mocks import RecordedResource, fake_outputs
from spotgpu_pulumi.offline.program import ProgramError

_LEVELS = {level.value: level for level in EnforcementLevel}
_PROTO_LEVELS = {
    EnforcementLevel.ADVISORY: proto.ADVISORY,
    EnforcementLevel.MANDATORY: proto.MANDATORY,
    EnforcementLevel.REMEDIATE: proto.REMEDIATE,
    EnforcementLevel.DISABLED: proto.DISABLED,
}
_REPORTED_LEVELS = {proto.ADVISORY: "advisory", proto.MANDATORY: "mandatory", proto.REMEDIATE: "mandatory"}


class PolicyConfigError(ProgramError):
    """The policy config is invalid; the message names the key, the value and the fix."""


@dataclass
class LoadedPack:
    """What ``PolicyPack(...)`` in the pack's ``__main__.py`` was called with."""

    name: str
    version: str
    policies: list[Policy]
    enforcement_level: EnforcementLevel
    initial_config: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def default_level(self, policy: Policy) -> EnforcementLevel:
        return policy.enforcement_level or self.enforcement_level


def load_pack(pack_dir: Path) -> LoadedPack:
    """Run ``pack_dir/__main__.py`` as the CLI would, capturing ``PolicyPack(...)`` instead of serving."""
    captured: list[dict[str, Any]] = []

    class _Recorder:
        def __init__(self, name: str, policies: list[Policy], **kwargs: Any) -> None:
            captured.append({"name": name, "policies": policies, **kwargs})

    with mock.patch.object(pulumi_policy, "PolicyPack", _Recorder), mock.patch.object(
        policy_module, "PolicyPack", _Recorder
    ):
        try:
            runpy.run_path(str(pack_dir), run_name="__main__")
        except Exception as err:  # the CLI would report the same failure and exit
            raise ProgramError(f"policy pack {pack_dir} failed to load: {type(err).__name__}: {err}; fix: run "
                               f"`python -m pulumi.policy 127.0.0.1:1 {pack_dir}` to see the traceback") from err
    if len(captured) != 1:
        raise ProgramError(f"{pack_dir}/__main__.py constructed {len(captured)} PolicyPack(s); fix: construct exactly one")
    args = captured[0]
    meta = yaml.safe_load((pack_dir / "PulumiPolicy.yaml").read_text()) or {}
    return LoadedPack(
        name=args.pop("name"),
        version=str(meta.get("version", "0.0.1")),
        policies=args.pop("policies"),
        enforcement_level=args.pop("enforcement_level", None) or EnforcementLevel.ADVISORY,
        initial_config=args.pop("initial_config", None) or {},
        extra=args,
    )


def _level(value: Any, where: str) -> EnforcementLevel:
    if isinstance(value, EnforcementLevel):
        return value
    if value not in _LEVELS:
        raise PolicyConfigError(f"{where}: enforcement level {value!r} is unknown; fix: use one of {sorted(_LEVELS)}")
    return _LEVELS[value]


def _split(value: Any, where: str) -> tuple[EnforcementLevel | None, dict[str, Any]]:
    """A config entry is a bare level or an object with ``enforcementLevel`` and properties."""
    if isinstance(value, str | EnforcementLevel):
        return _level(value, where), {}
    if not isinstance(value, Mapping):
        raise PolicyConfigError(f"{where}: {value!r} is neither a level nor an object; fix: use \"mandatory\" or "
                                "{\"enforcementLevel\": ..., <properties>}")
    props = {k: v for k, v in value.items() if k != "enforcementLevel"}
    level = _level(value["enforcementLevel"], f"{where}.enforcementLevel") if "enforcementLevel" in value else None
    return level, props


def resolve_config(pack: LoadedPack, config: Mapping[str, Any]) -> dict[str, tuple[EnforcementLevel, dict[str, Any]]]:
    """Each policy's effective level and properties, as the engine computes them before Configure."""
    by_name = {p.name: p for p in pack.policies}
    unknown = sorted(set(config) - set(by_name) - {"all"})
    if unknown:
        raise PolicyConfigError(f"policy config names {unknown}, not in pack {pack.name}; fix: use 'all' or one of "
                                f"{sorted(by_name)}")
    all_level, _ = _split(config["all"], "all") if "all" in config else (None, {})
    resolved = {}
    for name, policy in by_name.items():
        schema = policy.config_schema
        props = {k: v["default"] for k, v in (schema.properties if schema else {}).items() if "default" in v}
        level = pack.default_level(policy)
        # Precedence, lowest first: policy default, pack initial config, config "all", config entry.
        layers = [("initial config", pack.initial_config.get(name)), ("all", None), ("config", config.get(name))]
        for source, entry in layers:
            if source == "all":
                level = all_level or level
                continue
            if entry is None:
                continue
            entry_level, entry_props = _split(entry, f"{source} {name}")
            props.update(entry_props)
            level = entry_level or level
        _validate(name, policy, props)
        resolved[name] = (level, props)
    return resolved


def _validate(name: str, policy: Policy, props: dict[str, Any]) -> None:
    schema = policy.config_schema
    properties = schema.properties if schema else {}
    document = {
        "type": "object",
        "properties": properties,
        "required": (schema.required or []) if schema else [],
        # Stricter than the engine: a misspelt property must not be silently ignored.
        "additionalProperties": False,
    }
    error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(document).iter_errors(props))
    if error is not None:
        path = ".".join(str(p) for p in error.absolute_path) or "(properties)"
        allowed = sorted(properties) or "none"
        raise PolicyConfigError(f"policy config {name}.{path}: {error.message}; fix: see docs/policies.md "
                                f"(properties of {name}: {allowed})")


def _struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(dict(values))
    return s


def _options(r: RecordedResource) -> proto.AnalyzerResourceOptions:
    req = r.request
    return proto.AnalyzerResourceOptions(
        protect=bool(getattr(req, "protect", False)),
        ignoreChanges=list(getattr(req, "ignoreChanges", [])),
        additionalSecretOutputs=list(getattr(req, "additionalSecretOutputs", [])),
        parent=r.parent,
    )


def _properties(r: RecordedResource) -> struct_pb2.Struct:
    return r.request.object if r.request is not None else _struct(r.inputs)


def _outputs(r: RecordedResource) -> struct_pb2.Struct:
    inputs = json_format.MessageToDict(_properties(r))
    if not r.custom:
        return _struct(inputs)
    _, outputs = fake_outputs(r.type, r.name, inputs)
    return _struct(outputs)


def _stack_resource(r: RecordedResource) -> proto.AnalyzerResource:
    return proto.AnalyzerResource(
        type=r.type,
        properties=_outputs(r),
        urn=r.urn,
        name=r.name,
        options=_options(r),
        parent=r.parent,
        dependencies=r.dependencies,
        propertyDependencies={k: proto.AnalyzerPropertyDependencies(urns=v) for k, v in r.property_dependencies.items()},
    )


def read_config(config_path: Path | None) -> dict[str, Any]:
    if config_path is None:
        return {}
    try:
        doc = json.loads(config_path.read_text())
    except (OSError, ValueError) as err:
        raise PolicyConfigError(f"{config_path}: {err}; fix: give a JSON object of policy name -> level or object") from None
    if not isinstance(doc, dict):
        raise PolicyConfigError(f"{config_path}: top level is {type(doc).__name__}; fix: use a JSON object")
    return doc


def analyze(resources: list[RecordedResource], pack_dir: Path, config_path: Path | None) -> list[dict[str, Any]]:
    """Diagnostics as ``{policy, level, urn, message}``; level is "mandatory" or "advisory"."""
    return analyze_with(resources, load_pack(Path(pack_dir)), read_config(config_path))


def analyze_with(resources: list[RecordedResource], pack: LoadedPack, config: Mapping[str, Any]) -> list[dict[str, Any]]:
    resolved = resolve_config(pack, config)
    servicer = policy_module._PolicyAnalyzerServicer(  # private API: pinned pulumi-policy==1.21.0
        pack.name, pack.version, pack.policies, pack.enforcement_level, pack.initial_config or None
    )
    servicer.Configure(
        proto.ConfigureAnalyzerRequest(
            policyConfig={
                name: proto.PolicyConfig(enforcementLevel=_PROTO_LEVELS[level], properties=_struct(props))
                for name, (level, props) in resolved.items()
            }
        ),
        None,
    )
    descriptions = {p.name: p.description for p in pack.policies}
    out: list[dict[str, Any]] = []

    def collect(response: proto.AnalyzeResponse, default_urn: str) -> None:
        for d in response.diagnostics:
            prefix = descriptions.get(d.policyName, "") + "\n"
            message = d.message[len(prefix):] if d.message.startswith(prefix) else d.message
            out.append({
                "policy": d.policyName,
                "level": _REPORTED_LEVELS.get(d.enforcementLevel, "advisory"),
                "urn": d.urn or default_urn,
                "message": message,
            })

    for r in resources:
        request = proto.AnalyzeRequest(type=r.type, properties=_properties(r), urn=r.urn, name=r.name, options=_options(r))
        collect(servicer.Analyze(request, None), r.urn)
    stack = proto.AnalyzeStackRequest(resources=[_stack_resource(r) for r in resources])
    collect(servicer.AnalyzeStack(stack, None), "")
    return out
