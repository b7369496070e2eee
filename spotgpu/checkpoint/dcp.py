"""DCP checkpoints for a training loop: :class:`DCPCheckpointManager`, plus the storage plugins.

:class:`DCPCheckpointManager` gives ``torch.distributed.checkpoint`` (FSDP2, DTensor) the
contract of :class:`~spotgpu.checkpoint.CheckpointManager` that ``spotgpu.gang`` relies on:
``save``, ``save_final(step, state_dict, budget_seconds) -> FinalSaveResult`` with the same
budget rules, ``last_save_seconds``, and a verified ``restore`` that DCP reshards to the
current world (2 ranks -> 1, 3, 4...). The storage plugins it runs on
(:class:`GenerationWriter`, :class:`GenerationReader`, :func:`load_verified`) live in
:mod:`spotgpu.checkpoint.dcp_storage` and are re-exported here for direct ``dcp.save`` use.

Usage (every rank)::

    ckpt = DCPCheckpointManager(url)
    restored = ckpt.restore(state_dict)          # in place, resharded; None on a fresh start
    ckpt.save(step, state_dict)                  # periodic
    result = ckpt.save_final(step, state_dict, budget_seconds=30.0)

DCP checkpoints do not go through a node-local tier (``checkpointTiers``): a DCP generation is one
gang-wide object (the coordinator's metadata locates every item in every rank's shard, and a
resharded load reads ranges of other ranks' shards), while the tier keeps and restores each rank's
own part of a same-size gang. Every save goes to the store; on a VM with a tier the manager says so
once (docs/checkpoints.md, "Checkpoint tiers").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import torch.distributed as dist

from spotgpu.checkpoint import reader, writer
from spotgpu.checkpoint.dcp_storage import (
    COMMITTING,
    METADATA_KEY,
    PLANNING,
    WRITING,
    AlreadyCommitted,
    BudgetExhausted,
    ExactSavePlanner,
    GenerationReader,
    GenerationWriter,
    load_verified,
)
from spotgpu.checkpoint.hashing import DEFAULT_HASH
from spotgpu.checkpoint.results import FinalSaveResult, GenerationInfo, RestoreResult
from spotgpu.checkpoint.tiered import LocalTier
from spotgpu.storage.store import Store, open_store

log = logging.getLogger(__name__)

__all__ = [
    "COMMITTING",
    "METADATA_KEY",
    "PLANNING",
    "WRITING",
    "AlreadyCommitted",
    "BudgetExhausted",
    "DCPCheckpointManager",
    "ExactSavePlanner",
    "GenerationReader",
    "GenerationWriter",
    "final_reason",
    "load_verified",
]


def _failures(err: BaseException) -> dict[int, BaseException] | None:
    """Rank -> exception of a DCP ``CheckpointException`` (identical on every rank), else None."""
    from torch.distributed.checkpoint.api import CheckpointException

    if not isinstance(err, CheckpointException):
        return None
    return {rank: wrapped[0] for rank, wrapped in err.failures.items()}


def final_reason(rank: int, failures: Mapping[int, BaseException], budget_seconds: float) -> str:
    """Why a budgeted save did not commit, worded from ``rank``'s side (a pure function).

    A rank that ran out itself says where; a rank that had finished says what it was
    waiting for: "waiting for rank 1's part" when rank 1 was still writing, "waiting for the
    commit marker" when the coordinator ran out while committing."""
    budget = f"budget of {budget_seconds:.1f}s"
    others = {r: e for r, e in failures.items() if not isinstance(e, BudgetExhausted)}
    if others:
        first = min(others)
        return f"failed on rank {first}: {others[first]}"
    ran_out: dict[int, BudgetExhausted] = {r: e for r, e in failures.items() if isinstance(e, BudgetExhausted)}
    if any(e.phase == PLANNING for e in ran_out.values()):  # every rank stood at the same place
        return f"{budget} ran out while {PLANNING} (nothing written)"
    if rank in ran_out:
        phase = ran_out[rank].phase
        where = {WRITING: "writing this rank's objects", COMMITTING: "committing (DCP metadata and marker)"}
        return f"{budget} ran out while {where.get(phase, phase)}; cancelled"
    if not ran_out:
        return f"{budget}: the save failed without a reason"
    first = min(ran_out)
    phase = ran_out[first].phase
    waiting = {WRITING: f"waiting for rank {first}'s part", COMMITTING: "waiting for the commit marker"}
    return f"{budget} ran out while {waiting.get(phase, phase)} (rank {first} was still {phase}); cancelled"


class DCPCheckpointManager:
    """DCP checkpoints with the :class:`~spotgpu.checkpoint.CheckpointManager` contract the
    gang relies on: ``save``, ``save_final(step, state_dict, budget_seconds)``,
    ``last_save_seconds`` and a verified ``restore`` that reshards to the current world.

    Every rank of the process group makes the same calls in the same order (they are DCP
    collectives). A final save runs in the caller's thread, not in an abandoned background
    thread as the plain manager's does: a save left running would keep issuing collectives on
    the group that the caller goes on using (the gang's agreement), so instead every rank
    checks the deadline at each chunk and before the commit, and DCP hands a rank's
    "out of time" to every other rank."""

    def __init__(
        self,
        url: str,
        *,
        store: Store | None = None,
        store_options: Mapping[str, Any] | None = None,
        hash_algorithm: str = DEFAULT_HASH,
        commit_timeout_seconds: float = 600.0,
        process_group: dist.ProcessGroup | None = None,
    ) -> None:
        self.url = url
        self.store = store if store is not None else open_store(url, **dict(store_options or {}))
        self.hash_algorithm = hash_algorithm
        self.commit_timeout_seconds = commit_timeout_seconds
        self.process_group = process_group
        #: Seconds the last committed save of this manager took (the gang's fits-in-budget estimate).
        self.last_save_seconds: float | None = None
        self._warn_of_an_unused_tier()

    def _warn_of_an_unused_tier(self) -> None:
        """Say once, on rank 0, that the VM's local tier goes unused: a tier config this runtime cannot read
        is no reason to refuse a DCP job, which never reads it (it is the tiered manager's to refuse)."""
        if self._rank() != 0:
            return
        try:
            tier = LocalTier.from_environment()
        except ValueError as err:  # pydantic's ValidationError is one
            log.debug("the local tier's config does not read (%s); DCP does not use it", err)
            return
        if tier is not None:
            log.warning("this VM has a local checkpoint tier (%s), which DCP checkpoints do not use: every save goes "
                        "to the object store (docs/checkpoints.md, \"Checkpoint tiers\")", tier.path)  # fmt: skip

    def _rank(self) -> int:
        """This process's rank in the group DCP runs on (the ranks its errors are keyed by)."""
        return dist.get_rank(self.process_group) if dist.is_available() and dist.is_initialized() else 0

    def _writer(self, step: int, deadline: float | None) -> GenerationWriter:
        return GenerationWriter(
            self.url,
            step,
            store=self.store,
            hash_algorithm=self.hash_algorithm,
            commit_timeout_seconds=self.commit_timeout_seconds,
            deadline=deadline,
        )

    def _save(self, step: int, state_dict: dict[str, Any], deadline: float | None) -> tuple[GenerationInfo, bool]:
        """The committed generation, and whether this call wrote it (False: already committed)."""
        import torch.distributed.checkpoint as dcp

        started = time.monotonic()
        storage = self._writer(step, deadline)
        try:
            dcp.save(state_dict, storage_writer=storage, planner=ExactSavePlanner(), process_group=self.process_group)
        except BaseException as err:
            failures = _failures(err) or {}
            done = [e for e in failures.values() if isinstance(e, AlreadyCommitted)]
            if not done or len(done) != len(failures):
                raise
            return GenerationInfo.from_record(reader.read_commit(self.store, step)), False
        record = storage.committed
        if record is None:  # not the coordinator: DCP returned, so the marker exists; check it names ours
            assert storage.generation is not None
            record = writer.wait_for_commit(self.store, storage.generation, step, timeout=10.0)
        self.last_save_seconds = time.monotonic() - started
        return GenerationInfo.from_record(record), True

    def save(self, step: int, state_dict: dict[str, Any]) -> GenerationInfo:
        """``dcp.save`` of ``state_dict`` as generation ``step``; returns once it is committed.
        A step that is already committed is not written again (its generation is returned)."""
        return self._save(step, state_dict, None)[0]

    def save_final(self, step: int, state_dict: dict[str, Any], budget_seconds: float) -> FinalSaveResult:
        """The last save before a stop, within ``budget_seconds`` (same rules as
        ``CheckpointManager.save_final``): no budget writes nothing; a save still running at
        the deadline is abandoned at the next chunk or before the commit, and the reason names
        the phase. Every rank must call it with the same go/no-go (``Gang.final_checkpoint``
        does); a marker written is the truth, so a commit that lands late still counts."""
        started = time.monotonic()
        if budget_seconds <= 0:
            return FinalSaveResult(False, 0.0, None, f"no time budget ({budget_seconds}s); nothing written")
        try:
            info, written = self._save(step, state_dict, started + budget_seconds)
        except BaseException as err:
            failures = _failures(err)
            if failures is None:
                if not isinstance(err, Exception):
                    raise
                failures = {self._rank(): err}
            elapsed = time.monotonic() - started
            return FinalSaveResult(False, elapsed, None, final_reason(self._rank(), failures, budget_seconds))
        elapsed = time.monotonic() - started
        if not written:
            return FinalSaveResult(
                True, elapsed, info.generation, f"step {step} was already committed; nothing written"
            )
        return FinalSaveResult(True, elapsed, info.generation, f"committed in {elapsed:.2f}s of {budget_seconds:.1f}s")

    def _anything_committed(self, max_step: int | None) -> bool:
        """The coordinator's answer, on every rank (so all of them start fresh, or none)."""
        steps = reader.committed_steps(self.store)
        answer = [any(max_step is None or s <= max_step for s in steps)]
        if dist.is_available() and dist.is_initialized():
            dist.broadcast_object_list(answer, group=self.process_group, group_src=0)
        return bool(answer[0])

    def restore(self, state_dict: dict[str, Any], *, max_step: int | None = None) -> RestoreResult | None:
        """Load the newest verified generation (at most ``max_step``) into ``state_dict`` in
        place, resharded by DCP to this world's state_dict (2 ranks -> 1, 3, 4...). Every rank
        loads the same generation. None on a fresh start (no commit marker at or below
        ``max_step``); if markers exist but none verifies, DCP's error is raised on every rank."""
        if not self._anything_committed(max_step):
            return None
        step = load_verified(state_dict, self.url, store=self.store, max_step=max_step)
        record = reader.read_commit(self.store, step)
        return RestoreResult(step, state_dict, record.generation)
