"""Commit agreements: the ranks of one save learn each other's progress without polling the store.

Without one, a rank other than the coordinator polls the commit marker and the verdict
(:class:`~spotgpu.checkpoint.writer.ShardWriter`, step 9), and the coordinator polls for
parts that are late. With one, two collectives per save replace all of that: every rank
says its part is written (or why not), then the coordinator says how the commit went and
hands every rank the marker it wrote. A failure anywhere is known to every rank at once.

- :class:`ProcessGroupAgreement`: over a ``torch.distributed`` process group (the gang's:
  ``Gang.commit_agreement()``), with the group's own timeout for a rank that vanished;
- :class:`ThreadAgreement`: ranks that are threads of one process (tests, ``bench/ckpt_scale.py``).

Every rank of the group must make the same saves in the same order, as with DCP.
"""

from __future__ import annotations

import threading
from typing import Any

#: What the coordinator hands every rank: why the commit failed (None: it did not), and the
#: marker's bytes when it committed.
Outcome = tuple[str | None, bytes | None]


class ProcessGroupAgreement:
    """A :class:`~spotgpu.checkpoint.writer.CommitAgreement` over the ranks of a process group (rank 0 commits).

    Its collectives run on a gloo group of its own over those ranks, made here: ``save_async``
    runs them on a background thread while training issues its own collectives, and two threads'
    calls on one group interleave in a different order on each rank (gloo then pairs the wrong
    operations: a size mismatch, or a hang until the timeout). So every rank constructs the
    agreement at the same point (a collective, like ``new_group``), and its saves, which run one
    at a time in step order, are the only users of the group. gloo because the objects are small
    and on the CPU, whatever backend trains.
    """

    def __init__(self, group: Any = None) -> None:
        import torch.distributed as dist

        self._dist = dist
        ranks = None if group is None else dist.get_process_group_ranks(group)
        self.group = dist.new_group(ranks=ranks, backend="gloo", use_local_synchronization=ranks is not None)

    def written(self, failure: str | None) -> dict[int, str]:
        dist = self._dist
        gathered: list[Any] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(gathered, (dist.get_rank(self.group), failure), group=self.group)
        return {rank: why for rank, why in gathered if why is not None}

    def outcome(self, failure: str | None, marker: bytes | None = None) -> Outcome:
        dist = self._dist
        box: list[Any] = [(failure, marker) if dist.get_rank(self.group) == 0 else None]
        dist.broadcast_object_list(box, group=self.group, group_src=0)
        return box[0][0], box[0][1]


class ThreadAgreement:
    """The agreement of ``world_size`` ranks that are threads; ``for_rank(r)`` is rank r's side."""

    def __init__(self, world_size: int, timeout: float = 600.0) -> None:
        self.world_size = world_size
        self._failures: dict[int, str] = {}
        self._outcome: Outcome = (None, None)
        self._lock = threading.Lock()
        self._sync = threading.Barrier(world_size, timeout=timeout)
        self._reset = threading.Barrier(world_size, action=self._clear, timeout=timeout)

    def _clear(self) -> None:  # runs once every rank has read, before any is released
        self._failures = {}
        self._outcome = (None, None)

    def for_rank(self, rank: int) -> _ThreadSide:
        return _ThreadSide(self, rank)


class _ThreadSide:
    def __init__(self, agreement: ThreadAgreement, rank: int) -> None:
        self.agreement, self.rank = agreement, rank

    def written(self, failure: str | None) -> dict[int, str]:
        a = self.agreement
        if failure is not None:
            with a._lock:
                a._failures[self.rank] = failure
        a._sync.wait()
        return dict(a._failures)

    def outcome(self, failure: str | None, marker: bytes | None = None) -> Outcome:
        a = self.agreement
        if self.rank == 0:
            a._outcome = (failure, marker)
        a._sync.wait()
        result = a._outcome
        a._reset.wait()
        return result
