"""``torch.distributed.checkpoint`` storage plugins: DCP/FSDP checkpoints as verified generations.

:class:`GenerationWriter` makes every ``dcp.save`` a generation of this library: each rank
writes its items as hashed objects and its manifest part; the coordinator pickles DCP's
global ``Metadata`` into a hashed object and writes the create-only commit marker in
``finish``. The coordinator picks the generation's session token in
``prepare_global_plan`` and hands it to every rank through the save plan, so the ranks
agree without any extra collective.

:class:`GenerationReader` loads the newest committed generation (or a given step),
checking the metadata's hash before unpickling it and every object's hash as it is
read. :func:`load_verified` retries older generations when one fails verification.

Usage (every rank)::

    dcp.save(state_dict, storage_writer=GenerationWriter(url, step=step))
    step = load_verified(state_dict, url)   # newest generation that verifies
"""

from __future__ import annotations

import io
import pickle
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint import (
    DefaultSavePlanner,
    LoadPlan,
    LoadPlanner,
    SavePlan,
    SavePlanner,
    StorageReader,
    StorageWriter,
)
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, StorageMeta
from torch.distributed.checkpoint.planner import LoadItemType, WriteItem, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from spotgpu.checkpoint import layout, reader, writer
from spotgpu.checkpoint.errors import CheckpointError, CommitConflictError, ObjectMissingError, VerificationError
from spotgpu.checkpoint.hashing import DEFAULT_HASH, digest
from spotgpu.checkpoint.manifest import CommitRecord, ObjectEntry
from spotgpu.checkpoint.results import FinalSaveResult, GenerationInfo, RestoreResult
from spotgpu.checkpoint.snapshot import Item
from spotgpu.checkpoint.store import Store, open_store
from spotgpu.checkpoint.torch import check_tensor, tensor_bytes, tensor_from_bytes

METADATA_KEY = "dcp.metadata"


class ExactSavePlanner(DefaultSavePlanner):
    """DCP's default save planner, but non-tensor values keep their exact dtypes.

    DCP stores values that are not tensors (NumPy arrays, Python objects) with
    ``torch.save``, whose default pickle protocol 2 turns a big-endian NumPy array into a
    native-endian one (equal values, another dtype). Protocol 5 keeps it. Tensors are
    unaffected either way; ``transform_object`` is DCP's documented extension point."""

    def transform_object(self, write_item: WriteItem, object: Any) -> Any:
        if write_item.type == WriteItemType.BYTE_IO:
            buffer = io.BytesIO()
            torch.save(object, buffer, pickle_protocol=5)
            return buffer
        return super().transform_object(write_item, object)


#: Where a final save's budget can run out, as each rank names it for itself.
PLANNING = "planning the save"
WRITING = "writing its objects"
COMMITTING = "committing"


class BudgetExhausted(writer.SaveCancelled):
    """A rank abandoned a budgeted DCP save: ``phase`` is where its deadline passed.

    Raised inside DCP's collectives, so DCP hands it (pickled) to every rank, each of
    which words the reason from where it stood (:func:`final_reason`)."""

    def __init__(self, rank: int, phase: str) -> None:
        super().__init__(rank, phase)
        self.rank, self.phase = rank, phase

    def __str__(self) -> str:
        return f"rank {self.rank}: the budget ran out while {self.phase}"


class AlreadyCommitted(CommitConflictError):
    """The step already has a commit marker: nothing was written."""

    def __init__(self, step: int, generation: str) -> None:
        super().__init__(step, generation)
        self.step, self.generation = step, generation

    def __str__(self) -> str:
        return f"step {self.step} is already committed as {self.generation}"


@dataclass(frozen=True)
class _PlanData:
    generation: str
    rank: int
    world_size: int


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class GenerationWriter(StorageWriter):
    """A DCP StorageWriter that commits ``step`` as a generation at ``url``."""

    def __init__(
        self,
        url: str,
        step: int,
        *,
        store: Store | None = None,
        store_options: Mapping[str, Any] | None = None,
        hash_algorithm: str = DEFAULT_HASH,
        commit_timeout_seconds: float = 600.0,
        deadline: float | None = None,
    ) -> None:
        super().__init__()
        self.url = url
        self.step = layout.check_step(step)
        self.store = store if store is not None else open_store(url, **dict(store_options or {}))
        self.hash_algorithm = hash_algorithm
        self.commit_timeout_seconds = commit_timeout_seconds
        #: ``time.monotonic()`` after which the save is abandoned (a final save's budget).
        self.deadline = deadline
        self.is_coordinator = False
        self.rank = 0
        self.generation: str | None = None
        self.world_size = 1
        self.committed: CommitRecord | None = None

    def reset(self, checkpoint_id: Any = None) -> None:
        if checkpoint_id is not None:
            self.step = layout.check_step(int(checkpoint_id))

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank", _rank()) or 0

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        # On the coordinator, inside DCP's planning collective: an error here reaches every
        # rank, so all of them skip a step that is already committed (before writing anything).
        try:
            existing = reader.read_commit(self.store, self.step)
        except ObjectMissingError:
            pass
        else:
            raise AlreadyCommitted(self.step, existing.generation)
        generation = layout.generation_name(self.step, secrets.token_hex(6))
        return [replace(p, storage_data=_PlanData(generation, i, len(plans))) for i, p in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        data: _PlanData = plan.storage_data
        self.generation, self.world_size, self.rank = data.generation, data.world_size, data.rank
        if self.out_of_time():
            raise BudgetExhausted(data.rank, PLANNING)
        items: list[Item] = []
        for wi in plan.items:
            value = planner.resolve_data(wi)
            key = f"{wi.index.fqn}@{wi.index.index}"
            if wi.type == WriteItemType.BYTE_IO:
                assert isinstance(value, io.BytesIO)
                items.append(Item(key, "bytes", memoryview(value.getbuffer()).cast("B")))
            else:
                assert isinstance(value, torch.Tensor)
                check_tensor(value, key)
                dtype = str(value.dtype).removeprefix("torch.")
                items.append(Item(key, "torch", tensor_bytes(value).data, dtype, tuple(value.shape)))
        try:
            part = writer.write_part(
                self.store,
                data.generation,
                self.step,
                data.rank,
                data.world_size,
                items,
                self.hash_algorithm,
                cancelled=self.out_of_time,
            )
        except writer.SaveCancelled:
            raise BudgetExhausted(data.rank, WRITING) from None
        results = [
            WriteResult(index=wi.index, size_in_bytes=entry.size, storage_data=entry)
            for wi, entry in zip(plan.items, part.objects, strict=True)
        ]
        fut: Future[list[WriteResult]] = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        assert self.generation is not None, "write_data ran before finish"
        if self.out_of_time():
            raise BudgetExhausted(self.rank, COMMITTING)
        metadata.storage_data = {wr.index: wr.storage_data for rank_results in results for wr in rank_results}
        metadata.storage_meta = self.storage_meta()
        body = pickle.dumps(metadata)
        path = f"{layout.generation_prefix(self.generation)}{METADATA_KEY}"
        self.store.put(path, body)
        entry = ObjectEntry(METADATA_KEY, path, len(body), digest(self.hash_algorithm, body))
        timeout = self.commit_timeout_seconds
        if self.deadline is not None:
            if self.out_of_time():
                raise BudgetExhausted(self.rank, COMMITTING)
            timeout = min(timeout, self.deadline - time.monotonic())
        self.committed = writer.commit(
            self.store,
            self.generation,
            self.step,
            self.world_size,
            self.hash_algorithm,
            timeout=timeout,
            extra_objects=(entry,),
        )

    def storage_meta(self) -> StorageMeta | None:
        return StorageMeta(checkpoint_id=self.generation or str(self.step))

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return False  # never picked implicitly; pass storage_writer=GenerationWriter(...)


class GenerationReader(StorageReader):
    """A DCP StorageReader for the newest committed generation (or ``step``) at ``url``."""

    def __init__(
        self,
        url: str,
        step: int | None = None,
        *,
        max_step: int | None = None,
        store: Store | None = None,
        store_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.url = url
        self.step = step
        self.max_step = max_step
        self.store = store if store is not None else open_store(url, **dict(store_options or {}))
        self.record: CommitRecord | None = None
        #: The generation the coordinator chose for every rank (set once reading starts).
        self.pinned: str | None = None
        self.skipped: list[tuple[str, str]] = []
        self.storage_data: dict[MetadataIndex, ObjectEntry] = {}

    def reset(self, checkpoint_id: Any = None) -> None:
        if checkpoint_id is not None:
            self.step = int(checkpoint_id)

    def _candidates(self) -> list[int]:
        if self.step is not None:
            return [self.step]
        return [s for s in reader.committed_steps(self.store) if self.max_step is None or s <= self.max_step]

    # Not ``**kwargs``: DCP looks for a parameter of that name and, when the first read
    # fails, retries as "rank-local metadata" without collectives on that rank only (a hang).
    def read_metadata(self, *args: Any, **options: Any) -> Metadata:
        candidates = self._candidates()
        if not candidates:
            raise VerificationError(f"no committed generation at {self.url} (a fresh start)")
        for step in candidates:
            try:
                record = reader.read_commit(self.store, step)
                entries = [e for e in record.extra_objects if e.key == METADATA_KEY]
                if len(entries) != 1:
                    raise VerificationError(f"generation {record.generation} was not written by GenerationWriter")
                for ref in record.parts:
                    reader.read_part(self.store, record, ref)
                body = reader.read_object(self.store, record.hash_algorithm, entries[0])
            except (CheckpointError, ValueError) as err:
                self.skipped.append((f"step {step}", str(err)))
                continue
            self.record, self.step = record, step
            metadata: Metadata = pickle.loads(bytes(body))  # hash-checked above
            return metadata
        raise VerificationError(f"no committed DCP generation verifies at {self.url} (skipped: {self.skipped})")

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        # Every rank read the metadata itself; pin the coordinator's choice so a commit
        # landing in between can never make ranks load different generations.
        generation = self.record.generation if self.record else None
        return [replace(p, storage_data=generation) for p in plans]

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        assert self.record is not None, "read_metadata ran before read_data"
        self.pinned = plan.storage_data
        if plan.storage_data is not None and plan.storage_data != self.record.generation:
            raise VerificationError(
                f"this rank chose {self.record.generation} but the coordinator chose {plan.storage_data}; load again"
            )
        by_object: dict[str, list[Any]] = {}
        for req in plan.items:
            by_object.setdefault(self.storage_data[req.storage_index].path, []).append(req)
        for requests in by_object.values():
            entry = self.storage_data[requests[0].storage_index]
            data = reader.read_object(self.store, self.record.hash_algorithm, entry)
            for req in requests:
                if req.type == LoadItemType.BYTE_IO:
                    planner.load_bytes(req, io.BytesIO(bytes(data)))
                    continue
                assert entry.dtype is not None and entry.shape is not None
                tensor = tensor_from_bytes(data, entry.dtype, list(entry.shape))
                tensor = narrow_tensor_by_index(tensor, req.storage_offsets, req.lengths)
                target = planner.resolve_tensor(req).detach()
                if target.size() != tensor.size():
                    raise VerificationError(
                        f"{entry.path}: shape {tuple(tensor.size())}, expected {tuple(target.size())}"
                    )
                target.copy_(tensor)
                planner.commit_tensor(req, target)
        fut: Future[None] = Future()
        fut.set_result(None)
        return fut

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return False


def load_verified(state_dict: dict[str, Any], url: str, **reader_options: Any) -> int:
    """``dcp.load`` from the newest generation whose hashes all match; older ones are tried
    when one fails. Returns the step.

    Every rank takes the same decision: a failure while reading (DCP gathers every rank's
    errors) retries below the generation the coordinator pinned, which every rank knows;
    a failure while planning (some rank found nothing it could verify) raises on every rank."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    max_step: int | None = reader_options.pop("max_step", None)
    failures: list[str] = []
    while True:
        storage = GenerationReader(url, max_step=max_step, **reader_options)
        try:
            dcp.load(state_dict, storage_reader=storage)
        except (Exception, CheckpointException) as err:  # CheckpointException is a BaseException
            pinned = layout.parse_generation(storage.pinned) if storage.pinned else None
            if pinned is None:
                raise
            failures.append(f"{storage.pinned}: {err}")
            max_step = pinned.step - 1
            if max_step < 0:
                raise VerificationError(f"no generation verified at {url}: {failures}") from err
            continue
        assert storage.step is not None
        return storage.step


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

    def _writer(self, step: int, deadline: float | None) -> GenerationWriter:
        return GenerationWriter(
            self.url,
            step,
            store=self.store,
            hash_algorithm=self.hash_algorithm,
            commit_timeout_seconds=self.commit_timeout_seconds,
            deadline=deadline,
        )

    def _save(self, step: int, state_dict: dict[str, Any], deadline: float | None) -> GenerationInfo:
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
            return GenerationInfo.from_record(reader.read_commit(self.store, step))
        record = storage.committed
        if record is None:  # not the coordinator: DCP returned, so the marker exists; check it names ours
            assert storage.generation is not None
            record = writer.wait_for_commit(self.store, storage.generation, step, timeout=10.0)
        self.last_save_seconds = time.monotonic() - started
        return GenerationInfo.from_record(record)

    def save(self, step: int, state_dict: dict[str, Any]) -> GenerationInfo:
        """``dcp.save`` of ``state_dict`` as generation ``step``; returns once it is committed.
        A step that is already committed is not written again (its generation is returned)."""
        return self._save(step, state_dict, None)

    def save_final(self, step: int, state_dict: dict[str, Any], budget_seconds: float) -> FinalSaveResult:
        """The last save before a stop, within ``budget_seconds`` (same rules as
        ``CheckpointManager.save_final``): no budget writes nothing; a save still running at
        the deadline is abandoned at the next chunk or before the commit, and the reason names
        the phase. Every rank must call it with the same go/no-go (``Gang.final_checkpoint``
        does); a marker written is the truth, so a commit that lands late still counts."""
        started = time.monotonic()
        if budget_seconds <= 0:
            return FinalSaveResult(False, 0.0, None, f"no time budget ({budget_seconds}s); nothing written")
        existing_before = self._committed_generation(step)
        try:
            info = self._save(step, state_dict, started + budget_seconds)
        except BaseException as err:
            failures = _failures(err)
            if failures is None:
                if not isinstance(err, Exception):
                    raise
                failures = {_rank(): err}
            elapsed = time.monotonic() - started
            return FinalSaveResult(False, elapsed, None, final_reason(_rank(), failures, budget_seconds))
        elapsed = time.monotonic() - started
        if existing_before == info.generation:
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

    def _committed_generation(self, step: int) -> str | None:
        try:
            return reader.read_commit(self.store, step).generation
        except (CheckpointError, ValueError):
            return None

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
