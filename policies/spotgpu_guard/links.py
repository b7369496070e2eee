"""Read the link contract (:mod:`spotgpu.tags`) off a concrete resource.

AWS and Azure carry links as tags (an Auto Scaling group's tags are a list of
``{key, value}``; everything else a map), GCP instance templates as metadata
(label values cannot hold URLs) with labels as a fallback for the simple keys.
The engine's ``tagsAll`` (AWS provider default tags) counts as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spotgpu import tags as contract
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
            if k.startswith("spotgpu-"):
                links.values.setdefault(k, v)
    elif isinstance(value, list):  # ASG tags: [{key, value, propagateAtLaunch}]
        for item in value:
            if item is UNKNOWN:
                links.unknown_maps.append(where)
            elif isinstance(item, dict) and isinstance(item.get("key"), str) and item["key"].startswith("spotgpu-"):
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


def describe_missing(key: str, links: Links) -> str:
    """Why a link could not be read, for messages."""
    if links.values.get(key) is UNKNOWN:
        return f"{key} cannot be read: its value is computed from an output that is unknown until apply"
    if links.unknown_maps:
        return f"{key} cannot be read: {', '.join(links.unknown_maps)} is unknown until apply"
    return f"no {key} {'metadata or label' if links.source != 'tags' else 'tag'}"
