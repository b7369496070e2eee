"""Who holds which copy, and where each rank restores from: pure decisions, tested without torch.

:func:`partners` places each rank's peer copies; :func:`choose_restore` picks the newest step
every rank of the gang can get and, for each rank, the nearest source of its shard. Ranks are
the gang's current ranks; a *shard* is named by the rank that saved it (after a restart a node
may hold a shard under another rank than its own: torchrun assigns ranks anew).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

LOCAL, PEER, STORE = "local", "peer", "store"


def ring_order(zones: Sequence[str]) -> list[int]:
    """Ranks in an order that alternates zones: the ranks of each zone in turn (zones by name, ranks ascending).

    Neighbours in this ring sit in different zones whenever the gang spans zones and none holds
    most of it, so a copy on the next rank survives its own zone's reclaim.
    """
    by_zone: dict[str, list[int]] = {}
    for rank, zone in enumerate(zones):
        by_zone.setdefault(zone, []).append(rank)
    queues = [by_zone[z] for z in sorted(by_zone)]
    order: list[int] = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    return order


def partners(zones: Sequence[str], copies: int) -> dict[int, tuple[int, ...]]:
    """Rank -> the ranks that hold a copy of its shard: the next ``copies`` ranks of :func:`ring_order`."""
    order = ring_order(zones)
    n = len(order)
    c = max(0, min(copies, n - 1))
    at = {rank: i for i, rank in enumerate(order)}
    return {rank: tuple(order[(at[rank] + j) % n] for j in range(1, c + 1)) for rank in range(n)}


@dataclass(frozen=True, order=True)
class Held:
    """One copy a node holds: the shard ``shard`` (the saving rank) of generation ``generation`` of ``step``,
    in a generation the whole gang committed to its local tiers."""

    step: int
    generation: str
    shard: int


@dataclass(frozen=True)
class Source:
    """Where one rank reads its shard: its own tier (``local``), rank ``holder``'s tier (``peer``), the store."""

    kind: str
    holder: int | None = None


@dataclass(frozen=True)
class RestorePlan:
    step: int
    generation: str
    sources: tuple[Source, ...]  # by current rank

    def sends(self, rank: int) -> list[int]:
        """The ranks ``rank`` sends their shard to (it holds a copy they need)."""
        return [r for r, s in enumerate(self.sources) if s.kind == PEER and s.holder == rank]


@dataclass
class Inventory:
    """What the gang can read: each rank's held copies, the store's committed steps, known bad copies."""

    world_size: int
    held: Sequence[Sequence[Held]]  # by current rank
    store: Sequence[tuple[int, str]]  # (step, generation) committed in the object store
    #: (step, generation, shard, holder) copies found bad on reading: never planned again
    bad: set[tuple[int, str, int, int]] = field(default_factory=set)
    #: store steps found bad for some shard: never planned again
    bad_store: set[int] = field(default_factory=set)


def _holders(inv: Inventory) -> dict[tuple[int, str], dict[int, list[int]]]:
    """(step, generation) -> shard -> current ranks holding a good copy of it."""
    out: dict[tuple[int, str], dict[int, list[int]]] = {}
    for rank, copies in enumerate(inv.held):
        for h in copies:
            if (h.step, h.generation, h.shard, rank) in inv.bad:
                continue
            out.setdefault((h.step, h.generation), {}).setdefault(h.shard, []).append(rank)
    return out


def choose_restore(inv: Inventory, max_step: int | None = None) -> RestorePlan | None:
    """The newest step every rank can get, and each rank's nearest source; None: nothing to restore.

    A step's shard ``r`` is readable from this rank's own tier, else from a rank that holds a
    copy, else from the store, when the store committed that very generation (an upload of the
    same local generation: the same bytes). Of two generations of one step the one with more
    shards held in the tiers wins. Holders are spread: a rank holding several wanted copies
    serves the first, others go to another holder when there is one.
    """
    holders = _holders(inv)
    store = {(s, g) for s, g in inv.store if s not in inv.bad_store}
    candidates = {(step, generation): len(shards) for (step, generation), shards in holders.items()}
    for key in store:
        candidates.setdefault(key, 0)
    for step, generation in sorted(candidates, key=lambda k: (k[0], candidates[k]), reverse=True):
        if max_step is not None and step > max_step:
            continue
        shards = holders.get((step, generation), {})
        in_store = (step, generation) in store
        sources: list[Source] = []
        busy: dict[int, int] = {}
        for rank in range(inv.world_size):
            owners = shards.get(rank, [])
            if rank in owners:
                sources.append(Source(LOCAL))
            elif owners:
                holder = min(owners, key=lambda h: (busy.get(h, 0), h))
                busy[holder] = busy.get(holder, 0) + 1
                sources.append(Source(PEER, holder))
            elif in_store:
                sources.append(Source(STORE))
            else:
                break
        else:
            return RestorePlan(step, generation, tuple(sources))
    return None

