"""The stop check's wire format: one float64 vector per rank, reduced with MAX.

Every field is arranged so that MAX is the gang's answer: a flag set anywhere is set
everywhere, the smallest budget deadline is carried negated, the smallest proposed check
interval is carried negated, and each rank's own slot says whether (and how) it was noticed.
Pure functions on lists, so the rules are tested without torch.
"""

from __future__ import annotations

from dataclasses import dataclass

NONE = float("-inf")
KINDS = ("rebalance", "maintenance", "preempt", "terminate", "drain")
#: A rank's slot: 0 = not noticed, EARLY + kind index, FINAL + kind index (MAX prefers final).
EARLY = 10.0
FINAL = 20.0
_HEADER = 4  # final flag, early flag, -budget deadline, -proposed every


@dataclass(frozen=True)
class LocalView:
    """What this rank knows from its own agent at a check."""

    final: bool = False
    early: bool = False
    kind: str | None = None
    budget_deadline: float | None = None
    propose_every: int = 1


@dataclass(frozen=True)
class GangView:
    """What every rank knows after the check (identical on every rank)."""

    final: bool
    early: bool
    budget_deadline: float | None
    every: int
    noticed: dict[int, tuple[str, str]]  # rank -> (checkpoint early|final, kind)

    @property
    def noticed_ranks(self) -> list[int]:
        return sorted(self.noticed)


def encode(view: LocalView, rank: int, world_size: int) -> list[float]:
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world size {world_size}")
    vector = [0.0] * (_HEADER + world_size)
    vector[0] = 1.0 if view.final else 0.0
    vector[1] = 1.0 if view.early else 0.0
    deadline = view.budget_deadline if view.final else None
    vector[2] = NONE if deadline is None else -deadline
    vector[3] = -float(max(1, view.propose_every))
    if view.final or view.early:
        kind = KINDS.index(view.kind) if view.kind in KINDS else len(KINDS)
        vector[_HEADER + rank] = (FINAL if view.final else EARLY) + kind
    return vector


def reduce_max(vectors: list[list[float]]) -> list[float]:
    """What all_reduce(MAX) computes, for tests and the single-process case."""
    return [max(column) for column in zip(*vectors, strict=True)]


def decode(vector: list[float], world_size: int) -> GangView:
    noticed: dict[int, tuple[str, str]] = {}
    for rank in range(world_size):
        slot = vector[_HEADER + rank]
        if slot <= 0:
            continue
        checkpoint = "final" if slot >= FINAL else "early"
        index = int(slot - (FINAL if slot >= FINAL else EARLY))
        noticed[rank] = (checkpoint, KINDS[index] if index < len(KINDS) else "other")
    final = vector[0] > 0
    deadline = None if vector[2] == NONE else -vector[2]
    if final and deadline is None:
        deadline = 0.0  # a final notice without a deadline: no budget at all
    return GangView(final, vector[1] > 0 and not final, deadline, int(-vector[3]), noticed)

