"""Where the pool puts a gang's nodes, and who holds each node's peer copy: two small pure decisions.

A pool's spot group spans its zones: a GCP regional MIG distributes its instances evenly across its
zones, an AWS Auto Scaling group over several subnets balances across their Availability Zones, an
Azure Flexible scale set with zones spreads across them. Each launches where a zone has room, the
zone holding the fewest of the group's instances first, and elsewhere when a zone has none.
:func:`next_zone` is that choice, one launch at a time (the twin's regional group calls it), and
:func:`spread` the placement of a whole gang launched at once (the cost model places its traced gang
with it: :func:`spotgpu.economics.tiers.gang_loss_from_traces`).

Peer copies (issue 33) go to partners on a ring that alternates zones, the checkpoint library's own
rule (:func:`spotgpu.checkpoint.tiered.plan.partners`), so that a zone reclaim, which often takes a
zone's nodes together, rarely takes a shard with every copy of it; :func:`holders` applies it to the
twin's VMs and to the cost model's traced gang.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spotgpu.checkpoint.tiered.plan import partners


def next_zone(zones: Sequence[str], held: Mapping[str, int], room: Mapping[str, int]) -> str | None:
    """The zone the group's next launch lands in: one with room, holding the fewest of the group's nodes
    (ties: the zones' order, the group's first zone first); None when no zone has room."""
    open_zones = [z for z in zones if room.get(z, 0) > 0]
    if not open_zones:
        return None
    return min(open_zones, key=lambda z: (held.get(z, 0), zones.index(z)))


def spread(
    nodes: int, zones: Sequence[str], room: Mapping[str, int] | None = None, held: Mapping[str, int] | None = None
) -> tuple[str, ...]:
    """Each of ``nodes`` launches' zone, in launch order (None left out: no zone had room for it), by
    :func:`next_zone` one launch at a time, the group already holding ``held`` per zone.

    With room everywhere (``room`` None) the zones' counts differ by at most one and the first zones
    take the remainder: 5 nodes over ``a, b, c`` are ``a, b, c, a, b``."""
    held = dict(held or {})
    left = dict(room) if room is not None else {z: nodes for z in zones}
    out = []
    for _ in range(nodes):
        zone = next_zone(zones, held, left)
        if zone is None:
            break
        out.append(zone)
        held[zone] = held.get(zone, 0) + 1
        left[zone] -= 1
    return tuple(out)


def holders(members: Sequence[tuple[str, str]], copies: int) -> dict[str, set[str]]:
    """VM id -> the VMs holding its shard (itself and its ``copies`` partners), for ``members`` given as
    ``(vm id, zone)``: the library's ring over the members sorted by zone and id."""
    ordered = sorted(members, key=lambda m: (m[1], m[0]))
    ids = [vm for vm, _ in ordered]
    ring = partners([zone for _, zone in ordered], copies)
    return {ids[r]: {ids[r], *(ids[p] for p in ring[r])} for r in range(len(ids))}


__all__ = ["holders", "next_zone", "spread"]
