"""The stack as the rules see it: concrete resources, their links and their companions.

Every rule is a stack policy because none of them can be judged from one resource:
an Auto Scaling group's bootstrap lives in its launch template, an S3 bucket's
versioning in a separate ``BucketVersioning``, a pool's checkpoint store and
fallback group are other resources named by its tags. Companions are found first
through the engine's property dependencies (which work even when ids are unknown
at preview) and then by name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import PolicyResource, StackValidationArgs

from spotgpu_guard.values import UNKNOWN, dig, plain


@dataclass
class Res:
    """One resource with plain properties (unknowns as UNKNOWN)."""

    type: str
    urn: str
    name: str
    props: dict[str, Any]
    parent: str | None = None
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_policy(cls, r: PolicyResource) -> Res:
        props = plain(r.props)
        return cls(
            type=r.resource_type,
            urn=r.urn,
            name=r.name,
            props=props if isinstance(props, dict) else {},
            parent=r.parent.urn if r.parent is not None else None,
            dependencies=[d.urn for d in r.dependencies],
            property_dependencies={k: [d.urn for d in v] for k, v in r.property_dependencies.items()},
        )

    def get(self, *path: str | int) -> Any:
        return dig(self.props, *path)

    def label(self) -> str:
        """How messages name the resource: its Pulumi name and type token."""
        return f"'{self.name}' ({self.type})"

    def deps_of(self, prop: str) -> list[str]:
        return self.property_dependencies.get(prop, [])


class Inventory:
    """Index of a stack's resources by URN and type, in URN order.

    The engine lists a stack's resources in no fixed order (registrations race), so a rule that
    names "the first" of several would name a different one from run to run without the sort.
    """

    def __init__(self, resources: Iterable[Res]) -> None:
        self.resources = sorted(resources, key=lambda r: r.urn)
        self.by_urn = {r.urn: r for r in self.resources}
        self._by_type: dict[str, list[Res]] = defaultdict(list)
        for r in self.resources:
            self._by_type[r.type].append(r)

    @classmethod
    def from_args(cls, args: StackValidationArgs) -> Inventory:
        return cls(Res.from_policy(r) for r in args.resources)

    def of_type(self, *types: str) -> list[Res]:
        return [r for t in types for r in self._by_type.get(t, [])]

    def linked(self, res: Res, prop: str, types: Iterable[str], *, by_name: Any = None) -> list[Res]:
        """Resources of ``types`` that ``res`` references through ``prop``.

        First by property dependency (survives unknown ids), then, when ``by_name``
        is a known string, by the target's name/id-like properties.
        """
        wanted = set(types)
        found = [self.by_urn[u] for u in res.deps_of(prop) if u in self.by_urn and self.by_urn[u].type in wanted]
        if found or not isinstance(by_name, str):
            return found
        return [r for r in self.of_type(*wanted) if by_name in names_of(r)]

    def companions(self, target: Res, types: Iterable[str], prop: str, *, target_names: set[str]) -> list[Res]:
        """Resources of ``types`` whose ``prop`` points at ``target`` (dependency or name)."""
        out = []
        for r in self.of_type(*types):
            if target.urn in r.deps_of(prop) or (isinstance(r.get(prop), str) and r.get(prop) in target_names):
                out.append(r)
        return out


#: Properties that carry a resource's cloud-side name or id, per cloud convention.
_NAME_PROPS = ("name", "bucket", "accountName", "vmScaleSetName", "id", "selfLink", "arn", "vmName")


def names_of(res: Res) -> set[str]:
    """Every known string a reference to ``res`` might use (name, bucket, id, self link...)."""
    return {v for k in _NAME_PROPS if isinstance(v := res.props.get(k), str)}


def known_name(res: Res, *props: str) -> Any:
    """The first of ``props`` that is set: a string, UNKNOWN, or None when none is set."""
    for p in props:
        v = res.get(p)
        if v is UNKNOWN or isinstance(v, str):
            return v
    return None
