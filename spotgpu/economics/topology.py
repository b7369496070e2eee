"""A pool's own topology on the spot traces: which traced zone stands in for each pool zone.

``simulate --stack S --pool P`` replays a pool, not a workload: the ladder may only move to
zones the pool really has. The traces were recorded in a few AWS zones, so each pool zone is
mapped onto one traced zone by a fixed, printed rule (docs/economics.md, "simulate a pool"):

1. The candidates are the traced zones of the pool's own region when the traces hold that
   region, else those of the traced region with the most zones (ties: by name).
2. Each pool zone, in the order the pool lists them, takes its own name when it is a candidate,
   else the first unused candidate in name order.
3. A pool zone left without a candidate is not replayed, and the mapping says so.

The traces record one GPU type per zone, so a pool's other types have no trace: the replayed
``alternate_sku`` rung has no group and only waits, which the mapping also says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from spotgpu.catalogue.names import region_of


@dataclass(frozen=True)
class ZoneMapping:
    pool: str
    region: str
    zones: tuple[str, ...]  # the pool's zones, as listed
    types: tuple[str, ...]  # the pool's GPU types or sizes, as listed
    traced: dict[str, str]  # pool zone -> traced zone that stands in for it
    how: dict[str, str]  # pool zone -> "same zone" | "stand-in" ; unmapped zones are absent
    unmapped: tuple[str, ...] = field(default=())

    @property
    def trace_zones(self) -> list[str]:
        """The traced zones replayed, in the pool's order (the first is the pool's first zone)."""
        return [self.traced[z] for z in self.zones if z in self.traced]

    def lines(self, alternate_sku: bool = True) -> list[str]:
        """The mapping for a human, one line each (``alternate_sku``: whether the ladder has that rung)."""
        pairs = ", ".join(f"{z} -> {self.traced[z]} ({self.how[z]})" for z in self.zones if z in self.traced)
        out = [f"topology of pool {self.pool}: zones {pairs}"]
        if self.unmapped:
            out.append(f"  not replayed (no traced zone left): {', '.join(self.unmapped)}")
        if len(self.types) > 1 and alternate_sku:
            out.append(f"  types {', '.join(self.types)}: the traces hold one type per zone, so the ladder's "
                       "alternate_sku rung has no group here and only waits")  # fmt: skip
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "poolZones": list(self.zones),
            "poolTypes": list(self.types),
            "traceZones": self.trace_zones,
            "mapping": [{"poolZone": z, "traceZone": self.traced[z], "how": self.how[z]}
                        for z in self.zones if z in self.traced],
            "notReplayed": list(self.unmapped),
        }


def map_pool_zones(
    pool: str, region: str, zones: Sequence[str], types: Sequence[str], trace_zones: Sequence[str]
) -> ZoneMapping:
    """Map ``zones`` (a pool in ``region``) onto ``trace_zones`` by the module's rule (pure)."""
    by_region: dict[str, list[str]] = {}
    for zone in sorted(trace_zones):
        by_region.setdefault(region_of(zone), []).append(zone)
    if region in by_region:
        candidates = by_region[region]
    else:
        candidates = by_region[min(by_region, key=lambda r: (-len(by_region[r]), r))] if by_region else []
    traced: dict[str, str] = {}
    how: dict[str, str] = {}
    free = [z for z in candidates if z not in zones]
    for zone in zones:
        if zone in candidates:
            traced[zone], how[zone] = zone, "same zone"
        elif free:
            traced[zone], how[zone] = free.pop(0), "stand-in"
    unmapped = tuple(z for z in zones if z not in traced)
    return ZoneMapping(pool, region, tuple(zones), tuple(types), traced, how, unmapped)
