"""``torch.distributed.checkpoint`` storage plugins: DCP/FSDP checkpoints as verified generations.

(Import them from :mod:`spotgpu.checkpoint.dcp`, which adds the manager a training loop holds.)

:class:`GenerationWriter` makes every ``dcp.save`` a generation of this library: each rank
packs its items into one shard object (like DCP's own one ``.distcp`` file per rank), hashed
in blocks, and writes its manifest part; the coordinator pickles DCP's global ``Metadata``
(whose ``storage_data`` says where each item lives: shard, offset, size, block hashes) into a
hashed object and writes the create-only commit marker in ``finish``, following
:class:`~spotgpu.checkpoint.writer.ShardWriter`'s call order. The coordinator picks the generation's session token in
``prepare_global_plan`` and hands it to every rank through the save plan, so the ranks
agree without any extra collective. With ``deadline=`` (a final save's budget) every rank
gives up at its next chunk, before its part, or before the commit, raising
:class:`BudgetExhausted` inside DCP's collective so DCP reports it to every rank.

:class:`GenerationReader` loads the newest committed generation (or a given step),
checking the metadata's hash before unpickling it and every block's hash as it is read:
ranged reads of the items this rank needs, adjacent ones in one request. Generations
written before issue 32 (one object per item) still load. :func:`load_verified` retries older generations when one fails verification.

Usage (every rank)::

    dcp.save(state_dict, storage_writer=GenerationWriter(url, step=step), planner=ExactSavePlanner())
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

import numpy as np
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
from spotgpu.checkpoint.manifest import CommitRecord, ItemEntry, ObjectEntry
from spotgpu.checkpoint.shard import read_items
from spotgpu.checkpoint.snapshot import Item
from spotgpu.checkpoint.torch import check_tensor, tensor_bytes, tensor_from_bytes
from spotgpu.storage.resilient import resilient
from spotgpu.storage.store import Store, open_store

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


def current_rank() -> int:
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
        self.store = resilient(store if store is not None else open_store(url, **dict(store_options or {})))
        self.hash_algorithm = hash_algorithm
        self.commit_timeout_seconds = commit_timeout_seconds
        #: ``time.monotonic()`` after which the save is abandoned (a final save's budget).
        self.deadline = deadline
        self.is_coordinator = False
        self.rank = 0
        self.generation: str | None = None
        self.world_size = 1
        self.committed: CommitRecord | None = None
        #: This rank's lease on the generation (``writer.WriteLease``): held from its first object
        #: until its part is written, and on the coordinator until the commit marker, so GC never
        #: deletes a DCP save in progress (docs/checkpoints.md, "GC and saves in progress").
        self._lease: writer.WriteLease | None = None

    def _release_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.__exit__(None, None, None)

    def reset(self, checkpoint_id: Any = None) -> None:
        if checkpoint_id is not None:
            self.step = layout.check_step(int(checkpoint_id))

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank", current_rank()) or 0

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
        shard_writer = writer.ShardWriter(
            self.store, data.generation, self.step, data.rank, data.world_size, self.hash_algorithm, deadline=self.deadline
        )
        self._lease = writer.WriteLease(shard_writer.store, data.generation, data.rank).__enter__()
        try:
            part = shard_writer.write(items, cancelled=self.out_of_time)
        except writer.SaveCancelled:
            self._release_lease()
            raise BudgetExhausted(data.rank, WRITING) from None
        except BaseException:
            self._release_lease()
            raise
        if not self.is_coordinator:
            self._release_lease()  # the coordinator's lease covers the generation until its commit
        results = [
            WriteResult(index=wi.index, size_in_bytes=entry.size, storage_data=entry)
            for wi, entry in zip(plan.items, part.items, strict=True)
        ]
        fut: Future[list[WriteResult]] = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        try:
            self._finish(metadata, results)
        finally:
            self._release_lease()

    def _finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        assert self.generation is not None, "write_data ran before finish"
        if self.out_of_time():
            raise BudgetExhausted(self.rank, COMMITTING)
        metadata.storage_data = {wr.index: wr.storage_data for rank_results in results for wr in rank_results}
        metadata.storage_meta = self.storage_meta()
        body = pickle.dumps(metadata)
        path = layout.coordinator_path(self.generation, METADATA_KEY)
        resilient(self.store, self.deadline).put(path, body)
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
            before_marker=self._lease.check if self._lease is not None else (lambda: None),
            deadline=self.deadline,
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
        self.store = resilient(store if store is not None else open_store(url, **dict(store_options or {})))
        self.record: CommitRecord | None = None
        #: The generation the coordinator chose for every rank (set once reading starts).
        self.pinned: str | None = None
        self.skipped: list[tuple[str, str]] = []
        self.storage_data: dict[MetadataIndex, ObjectEntry | ItemEntry] = {}

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
            below = "" if self.max_step is None else f" at or below step {self.max_step}"
            raise VerificationError(f"no committed generation{below} at {self.url}")
        for step in candidates:
            try:
                record = reader.read_commit(self.store, step)
                entries = [e for e in record.extra_objects if e.key == METADATA_KEY]
                if len(entries) != 1:
                    raise VerificationError(f"generation {record.generation} was not written by GenerationWriter")
                # The chain is marker -> metadata (hashed) -> storage_data (every item's block
                # hashes): the parts are not needed to load, so no rank reads N of them.
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
        by_entry: dict[ObjectEntry | ItemEntry, list[Any]] = {}
        for req in plan.items:
            by_entry.setdefault(self.storage_data[req.storage_index], []).append(req)
        data = self._read(list(by_entry))
        for entry, requests in by_entry.items():
            for req in requests:
                if req.type == LoadItemType.BYTE_IO:
                    planner.load_bytes(req, io.BytesIO(bytes(data[entry])))
                    continue
                assert entry.dtype is not None and entry.shape is not None
                tensor = tensor_from_bytes(data[entry], entry.dtype, list(entry.shape))
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

    def _read(self, entries: list[ObjectEntry | ItemEntry]) -> dict[ObjectEntry | ItemEntry, Any]:
        """Every entry's bytes, hash-checked: packed items by ranged reads (adjacent ones in
        one request), format-1 objects whole."""
        assert self.record is not None
        algorithm = self.record.hash_algorithm
        out: dict[ObjectEntry | ItemEntry, Any] = {}
        items = [e for e in entries if isinstance(e, ItemEntry)]
        buffers = {e: np.empty(e.size, dtype=np.uint8) for e in items}
        read_items(self.store, algorithm, [(e, buffers[e].data) for e in items])
        for item, buffer in buffers.items():
            out[item] = buffer
        for entry in entries:
            if isinstance(entry, ObjectEntry):
                out[entry] = reader.read_object(self.store, algorithm, entry)
        return out

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
