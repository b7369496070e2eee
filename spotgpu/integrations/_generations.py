"""A framework's own checkpoint directory stored as one spotgpu generation.

The Hugging Face ``Trainer`` and Lightning already know how to save and resume everything
they own (weights, optimizer, scheduler, loop counters, data position, callback state).
Re-encoding that would miss framework-internal state and break across versions, so the
callbacks let the framework write its usual checkpoint to local disk and store its files,
as opaque bytes, in a spotgpu generation: committed with the create-only marker and read
back only after every hash matched. Resuming materialises the newest verified generation
into a local directory and hands it to the framework's own resume path.

Each rank stores the files it wrote itself (rank 0 the shared ones, every rank its own
RNG file), so nothing is written twice. A restore reads every rank's part: each rank needs
the shared files, and a directory holding all of them is what the framework resumes from.

With a node-local tier (:class:`~spotgpu.checkpoint.tiered.TieredCheckpointManager`) each rank
saves its part to its node's tier and its peers, and the store gets every ``durable_every``-th;
a restore is the tier's (each rank's own part from the nearest verified copy: local, peer, store),
and rank 0's files then reach every rank by a broadcast over the tier's gloo group.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from spotgpu.checkpoint import CheckpointManager, reader
from spotgpu.checkpoint.errors import CheckpointError
from spotgpu.checkpoint.manager import SESSION_ENV
from spotgpu.checkpoint.results import RestoreResult
from spotgpu.checkpoint.tiered import TieredCheckpointManager
from spotgpu.storage.store import Store

log = logging.getLogger(__name__)

FILE_PREFIX = "file/"
#: Where a callback stages a framework checkpoint before storing it: hidden, and removed after.
#: (A visible ``spotgpu/`` left in the working directory shadowed the package: ``python -m spotgpu``
#: imported the empty directory.)
STAGING_DIR = ".spotgpu-staging"
#: Entries of a rank's part that are not framework files (the callback's rank-local state).
EXTRA_PREFIX = "extra/"
#: Bytes per broadcast when rank 0's restored files go to the other ranks (bounds nothing in memory:
#: each file is received in place; it keeps one collective's message within gloo's comfortable size).
BROADCAST_CHUNK = 16 << 20


@dataclass(frozen=True)
class RestoredDirectory:
    """A verified generation's files (relative path -> bytes) and this rank's extras.

    ``source``, ``seconds``, ``nbytes`` and ``notes`` are what the gang's ``restored`` record says
    (``Gang.restore``): where this rank's part came from (``store``, or with a local tier ``local``
    or ``peer``), how long the restore took, the bytes of this rank's part, why nearer copies were
    passed over. A store restore leaves the seconds to the gang's clock."""

    step: int
    generation: str
    files: dict[str, Any]
    extras: dict[str, Any] = field(default_factory=dict)
    source: str = "store"
    seconds: float | None = None
    nbytes: int | None = None
    notes: tuple[str, ...] = ()

    def materialise(self, directory: str | os.PathLike[str]) -> Path:
        """Write every file under ``directory`` (each atomically: ranks sharing a disk may
        write the same file at once, and a reader never sees half of one)."""
        root = Path(directory)
        for rel, data in self.files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
            with open(tmp, "wb") as out:
                out.write(np.ascontiguousarray(data).reshape(-1).view(np.uint8).data)
            os.replace(tmp, target)
        return root


def pack_files(directory: str | os.PathLike[str], relpaths: Iterable[str]) -> dict[str, Any]:
    """The files as checkpoint entries, memory-mapped (a large weight file is not copied)."""
    root = Path(directory)
    state: dict[str, Any] = {}
    for rel in sorted(relpaths):
        path = root / rel
        size = path.stat().st_size
        state[FILE_PREFIX + rel] = (
            np.memmap(path, dtype=np.uint8, mode="r") if size else np.empty(0, dtype=np.uint8)
        )
    return state


def remove_staging(directory: str | os.PathLike[str]) -> None:
    """Remove one staged checkpoint, then its staging parent once nothing else is staged there
    (another rank sharing the disk may still be staging its own step: its directory stays)."""
    path = Path(directory)
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):  # not empty (another rank) or already gone
        path.parent.rmdir()


def prune_local_checkpoints(output_dir: str | os.PathLike[str], pattern: re.Pattern[str], keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` local checkpoint directories whose name matches ``pattern``
    (group 1: the step); the store holds every committed one. Returns what was deleted."""
    root = Path(output_dir)
    found = sorted(
        ((int(m.group(1)), p) for p in (root.iterdir() if root.is_dir() else []) if p.is_dir() and (m := pattern.fullmatch(p.name))),
        key=lambda item: item[0],
    )
    doomed = [path for _, path in found[: max(0, len(found) - max(1, keep))]]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)  # ranks sharing a disk may race to it: either one wins
    return doomed


def files_under(directory: str | os.PathLike[str]) -> list[str]:
    root = Path(directory)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


class FrameworkCheckpoints:
    """Framework checkpoint directories in spotgpu generations at one store URL.

    It offers what :class:`spotgpu.gang.Gang` drives (``save``, ``save_final``,
    ``last_save_seconds``, ``restore(max_step=)``), so the gang's final checkpoint and its
    agreed restore work on framework checkpoints unchanged, through the node's local tier when
    ``manager`` has one. The callbacks' periodic saves go through :meth:`save_periodic`: with a
    tier, training waits only for the host copy of the state.
    """

    def __init__(self, manager: CheckpointManager | TieredCheckpointManager) -> None:
        self.manager = manager
        #: seconds the last save call held the training thread (``save_periodic`` with a tier: the wait for the
        #: save before it and the host copy; otherwise the whole save)
        self.last_blocked_seconds: float | None = None
        self._tier_asked = False
        self._store: Store | None = None

    @property
    def tiered(self) -> bool:
        """Saves and restores go through a node-local tier (and its peers) in front of the store."""
        return isinstance(self.manager, TieredCheckpointManager) and self.manager.tier is not None

    @property
    def last_save_seconds(self) -> float | None:
        """Seconds the manager's last committed save took from start to commit (with a tier: its local
        commit, steps 3-6 of :mod:`spotgpu.checkpoint.tiered.manager`, run in the background for a periodic
        save), not what training waited (:attr:`last_blocked_seconds`): the gang's estimate of whether a
        final save fits its budget."""
        manager = self.manager
        if isinstance(manager, TieredCheckpointManager) and manager.plain is not None:
            return manager.plain.last_save_seconds  # no tier on this VM: the store's manager saved
        return manager.last_save_seconds

    def save(self, step: int, state: Mapping[str, Any]) -> Any:
        """Commit ``step`` now (after the save in flight, if any) and return once it counts: the early
        checkpoint a rebalance notice asks for (``Gang.early_checkpoint``) is reported as committed."""
        started = time.monotonic()
        try:
            return self.manager.save(step, state)
        finally:
            self.last_blocked_seconds = time.monotonic() - started

    def save_periodic(self, step: int, state: Mapping[str, Any]) -> Any:
        """A periodic save. With a tier, the tier's ``save_async``: it waits for the save in flight, copies
        ``state`` to host memory (within the tier's ``memory_budget_bytes``; over it, until all but the last
        budget's worth is written) and returns; the local write, the peer copies and the upload run in the
        background, and a failure is raised by the next save call on every rank. Every byte of ``state`` is
        read before it returns: the framework may delete its checkpoint files right after (the Trainer's
        ``save_total_limit``, Lightning's staging directory). Without a tier, ``save`` as before: the plain
        manager's background save would hold a whole host copy of the state (the callback gives it no
        budget; weights and optimizer can exceed host memory) and write it to the store after training
        has moved on; its time is the store's upload, which the tier takes off the training thread."""
        if not self.tiered:
            return self.save(step, state)
        started = time.monotonic()
        try:
            return self.manager.save_async(step, state)
        finally:
            self.last_blocked_seconds = time.monotonic() - started

    def save_final(self, step: int, state: Mapping[str, Any], budget_seconds: float) -> Any:
        return self.manager.save_final(step, state, budget_seconds=budget_seconds)

    def close(self) -> None:
        """Let the tier's save in flight and its queued uploads to the store finish (nothing without a tier)."""
        if isinstance(self.manager, TieredCheckpointManager):
            self.manager.close()

    def restore(self, *, max_step: int | None = None) -> RestoredDirectory | None:
        """The newest committed generation (at or below ``max_step``) whose every part and
        object verifies; older ones are tried when a newer one fails. None: nothing verifies.

        With a local tier, the first call is the tier's collective restore (every rank calls it:
        ``Gang.restore``'s first round): the newest step every rank can get, each rank's part from
        its nearest verified copy, then rank 0's files broadcast to every rank. Only when the tier's
        plan finds nothing of this world size (a fresh start, or a world-size change) does it read
        the store part by part, as without a tier; so do later calls (``Gang.restore``'s further
        rounds reach only some ranks and must not be collective)."""
        if self.tiered and not self._tier_asked:
            self._tier_asked = True
            started = time.monotonic()
            result = self.manager.restore(max_step=max_step)
            if result is not None:
                return self._shared(result, started)
            log.info("no generation of %s rank(s) in the local tiers or the store; reading the store part by part",
                     self.manager.world_size)  # fmt: skip
        return self._from_store(max_step)

    def _shared(self, result: RestoreResult, started: float) -> RestoredDirectory:
        """This rank's part from the tier's restore, with rank 0's files (the shared ones) from rank 0."""
        assert isinstance(self.manager, TieredCheckpointManager)
        own: dict[str, Any] = {}
        extras: dict[str, Any] = {}
        for key, value in result.state.items():
            if key.startswith(FILE_PREFIX):
                own[key.removeprefix(FILE_PREFIX)] = value
            elif key.startswith(EXTRA_PREFIX):
                extras[key.removeprefix(EXTRA_PREFIX)] = value
        files = own
        if self.manager.world_size > 1:
            group = getattr(self.manager.link, "group", None)
            files = {**broadcast_files(own if self.manager.rank == 0 else {}, group), **own}
        return RestoredDirectory(result.step, result.generation, files, extras, result.source,
                                 time.monotonic() - started, result.nbytes, result.notes)  # fmt: skip

    def _durable_store(self) -> Store:
        """The object store (a tiered manager's own store managers are made per upload)."""
        if isinstance(self.manager, CheckpointManager):
            return self.manager.store
        if self._store is None:
            manager = self.manager
            self._store = CheckpointManager(manager.url, rank=manager.rank, world_size=manager.world_size,
                                            session=manager.session, **manager.store_kwargs).store  # fmt: skip
        return self._store

    def _from_store(self, max_step: int | None) -> RestoredDirectory | None:
        """Every rank's part from the store: a directory holding every file (any world size)."""
        store, rank = self._durable_store(), self.manager.rank
        for step in reader.committed_steps(store):
            if max_step is not None and step > max_step:
                continue
            try:
                record = reader.read_commit(store, step)
                files: dict[str, Any] = {}
                extras: dict[str, Any] = {}
                for ref in sorted(record.parts, key=lambda r: r.rank):
                    for key, value in reader.load_rank(store, record, ref.rank).items():
                        if key.startswith(FILE_PREFIX):
                            files[key.removeprefix(FILE_PREFIX)] = value
                        elif ref.rank == rank and key.startswith(EXTRA_PREFIX):
                            extras[key.removeprefix(EXTRA_PREFIX)] = value
            except (CheckpointError, ValueError) as err:
                log.warning("skipping step %s at %s: %s", step, self.manager.url, err)
                continue
            return RestoredDirectory(step, record.generation, files, extras)
        return None


def broadcast_files(files: Mapping[str, Any], group: Any) -> dict[str, np.ndarray]:
    """Rank 0's ``files`` (relative path -> bytes) on every rank of ``group`` (every rank calls it; the
    others pass nothing). One small header, then each file in :data:`BROADCAST_CHUNK` pieces received in
    place: gloo's broadcast, not rank 0 sending one copy per rank."""
    import warnings

    import torch
    import torch.distributed as dist

    rank = dist.get_rank(group)
    sources = {name: np.ascontiguousarray(value).reshape(-1).view(np.uint8) for name, value in files.items()}
    header: list[Any] = [[(name, int(data.size)) for name, data in sources.items()] if rank == 0 else None]
    dist.broadcast_object_list(header, src=0, group=group)
    out: dict[str, np.ndarray] = {}
    for name, size in header[0]:
        data = sources[name] if rank == 0 else np.empty(size, dtype=np.uint8)
        with warnings.catch_warnings():  # rank 0 sends from its restored (read-only) arrays; nothing writes them
            warnings.simplefilter("ignore", UserWarning)
            tensor = torch.from_numpy(data)
        for start in range(0, size, BROADCAST_CHUNK):
            dist.broadcast(tensor[start : start + BROADCAST_CHUNK], src=0, group=group)
        out[name] = data
    return out


def process_group() -> tuple[int, int]:
    """(rank, world size) of the default process group, or (0, 1) without one."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - the extras bring torch
        return 0, 1
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shared_session(world_size: int) -> str | None:
    """The save session every rank must share: the environment's (torchrun, or
    SPOTGPU_CKPT_SESSION), else a token rank 0 draws and broadcasts. None: one process."""
    if world_size == 1 or os.environ.get(SESSION_ENV) or os.environ.get("TORCHELASTIC_RUN_ID"):
        return None
    import torch.distributed as dist

    box = [secrets.token_hex(6)]
    dist.broadcast_object_list(box, src=0)
    return str(box[0])


def agreed_max(value: float) -> float:
    """MAX of ``value`` over the default process group (``value`` itself without one)."""
    _, world = process_group()
    if world == 1:
        return value
    import torch
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())
