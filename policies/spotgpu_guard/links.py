"""Read the link contract (:mod:`spotgpu.contract.tags`) off a concrete resource.

AWS and Azure carry links as tags (an Auto Scaling group's tags are a list of
``{key, value}``; everything else a map), GCP instance templates as metadata
(label values cannot hold URLs) with labels as a fallback for the simple keys.
The engine's ``tagsAll`` (AWS provider default tags) counts as well. The encoded links (ladder,
workload) are decoded here once (:func:`read_ladder`, :func:`read_workload`...) for every rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from spotgpu.catalogue.fit import GpuNeed
from spotgpu.contract import tags as contract
from spotgpu.models.workload import GpuRequirement, WorkloadProfile
from spotgpu_guard.inventory import Res
from spotgpu_guard.values import UNKNOWN


@dataclass
class Links:
    """Link values of one resource; ``unknown_maps`` names tag maps unknown at preview."""

    values: dict[str, Any] = field(default_factory=dict)
    unknown_maps: list[str] = field(default_factory=list)
    source: str = "tags"

    def get(self, key: str) -> Any:
        """The value (str or UNKNOWN), None when absent, UNKNOWN when the whole map is unknown."""
        if key in self.values:
            return self.values[key]
        return UNKNOWN if self.unknown_maps else None

    def merged_over(self, other: Links) -> Links:
        """These links, with ``other`` filling in keys these lack (e.g. ASG over its launch template)."""
        return Links({**other.values, **self.values}, self.unknown_maps + other.unknown_maps, self.source)


def _map_entries(value: Any, where: str, links: Links) -> None:
    if value is UNKNOWN:
        links.unknown_maps.append(where)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if k.startswith(contract.PREFIX):
                links.values.setdefault(k, v)
    elif isinstance(value, list):  # ASG tags: [{key, value, propagateAtLaunch}]
        for item in value:
            if item is UNKNOWN:
                links.unknown_maps.append(where)
            elif isinstance(item, dict) and isinstance(item.get("key"), str) and item["key"].startswith(contract.PREFIX):
                links.values.setdefault(item["key"], item.get("value"))


def links_of(res: Res) -> Links:
    """All ``spotgpu-*`` links the resource carries, whatever the cloud's carrier."""
    if res.type.startswith("gcp:"):
        links = Links(source="metadata/labels")
        _map_entries(res.get("metadata"), "metadata", links)
        _map_entries(res.get("labels"), "labels", links)
        return links
    links = Links(source="tags")
    _map_entries(res.get("tags"), "tags", links)
    _map_entries(res.get("tagsAll"), "tagsAll", links)
    for i, spec in enumerate(res.get("tagSpecifications") or []):
        if isinstance(spec, dict):
            _map_entries(spec.get("tags"), f"tagSpecifications[{i}].tags", links)
    return links


ROLE = contract.ROLE
POOL = contract.POOL
CHECKPOINT_STORE = contract.CHECKPOINT_STORE
FALLBACK_GROUP = contract.FALLBACK_GROUP
LADDER = contract.LADDER
WORKLOAD = contract.WORKLOAD
CHECKPOINT_INTERVAL = contract.CHECKPOINT_INTERVAL
NOTICE = contract.NOTICE
WAIVER = contract.WAIVER
ZONES = contract.ZONES
CONTROLLER_WAIVER = contract.CONTROLLER_WAIVER

T = TypeVar("T")


@dataclass(frozen=True)
class Decoded(Generic[T]):
    """One encoded link (ladder, workload) read and decoded once, the same way for every rule.

    ``raw`` is what the resource carries (a str, UNKNOWN, or None when absent); ``value`` the
    decoded link, None unless it decodes; ``error`` the decoder's message when a value is present
    and known but malformed (each rule phrases its own finding, or leaves it to the rule that owns it).
    """

    raw: Any
    value: T | None = None
    error: str | None = None


def _decode(raw: Any, decode: Callable[[str], T | None]) -> Decoded[T]:
    if raw is None or raw is UNKNOWN:
        return Decoded(raw)
    try:
        return Decoded(raw, decode(str(raw)))
    except ValueError as err:  # pydantic's ValidationError is one too
        return Decoded(raw, error=str(err))


def read_ladder(links: Links) -> Decoded[list[contract.DecodedStep]]:
    """The ``spotgpu-ladder`` link (:func:`spotgpu.contract.tags.decode_ladder`)."""
    return ladder_value(links.get(LADDER))


def ladder_value(raw: Any) -> Decoded[list[contract.DecodedStep]]:
    """A ``spotgpu-ladder`` value read from wherever it was found (the pool, or its fallback group)."""
    return _decode(raw, contract.decode_ladder)


def read_workload(links: Links) -> Decoded[dict[str, float]]:
    """The ``spotgpu-workload`` figures (:func:`spotgpu.contract.tags.decode_workload`)."""
    return _decode(links.get(WORKLOAD), contract.decode_workload)


def read_workload_profile(links: Links) -> Decoded[WorkloadProfile]:
    """The ``spotgpu-workload`` link as a whole profile (:func:`spotgpu.contract.tags.workload_from_tag`)."""
    return _decode(links.get(WORKLOAD), contract.workload_from_tag)


def _gpu_block(text: str) -> GpuRequirement | None:
    block = contract.decode_gpu_block(text)
    return None if block is None else GpuRequirement.model_validate(block)


def read_gpu_block(links: Links) -> Decoded[GpuRequirement]:
    """The workload link's ``gpu`` block as the model (speeds per GPU model included; None without one)."""
    return _decode(links.get(WORKLOAD), _gpu_block)


def read_gpu_need(links: Links) -> Decoded[GpuNeed]:
    """The GPU need the ``spotgpu-workload`` link states (:func:`spotgpu.contract.tags.decode_gpu`; None without a gpu block)."""
    return _decode(links.get(WORKLOAD), contract.decode_gpu)


def describe_missing(key: str, links: Links) -> str:
    """Why a link could not be read, for messages."""
    if links.values.get(key) is UNKNOWN:
        return f"{key} cannot be read: its value is computed from an output that is unknown until apply"
    if links.unknown_maps:
        return f"{key} cannot be read: {', '.join(links.unknown_maps)} is unknown until apply"
    return f"no {key} {'metadata or label' if links.source != 'tags' else 'tag'}"
