"""CheckpointManager: the one object a training loop (or the node agent) talks to.

It ties the pieces together: a :class:`~spotgpu.storage.store.Store` opened from a
URL, the commit protocol (:mod:`.writer`), verified restore (:mod:`.reader`), async
snapshots (:mod:`.async_save`) and retention (:mod:`.policies`, :mod:`.retention`).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from spotgpu.checkpoint import layout, manifest, reader, writer
from spotgpu.checkpoint.async_save import PendingSave, SaveHandle, SnapshotPipe
from spotgpu.checkpoint.errors import (
    CommitConflictError,
    ObjectMissingError,
    VerificationError,
    WorldSizeMismatch,
)
from spotgpu.checkpoint.hashing import DEFAULT_HASH, new_hasher
from spotgpu.checkpoint.manifest import CommitRecord
from spotgpu.checkpoint.policies import DebrisPolicy, GracePeriod, KeepLast, RetentionPolicy, SavePolicy
from spotgpu.checkpoint.reader import VerifyReport
from spotgpu.checkpoint.results import FinalSaveResult, GcReport, GenerationInfo, RestoreResult
from spotgpu.checkpoint.retention import GcPlan, StoreSnapshot, plan_gc
from spotgpu.checkpoint.snapshot import DEFAULT_CHUNK, ChunkPool, HostBudget, Item, check_budget, normalize
from spotgpu.storage.resilient import resilient
from spotgpu.storage.store import Store, open_store
from spotgpu.storage.urls import parse_store_url, redact_url

log = logging.getLogger(__name__)

SESSION_ENV = "SPOTGPU_CKPT_SESSION"
#: The share of its last wait a rank sleeps before its first poll for the next marker (a save
#: more than 20 % faster than the last returns that much later), and its ceiling.
FIRST_WAIT_SHARE = 0.8
MAX_FIRST_WAIT_SECONDS = 30.0


def _default_session(world_size: int) -> str:
    """Single process: a fresh random token. Many ranks: they must share one, so it comes
    from the environment (torchrun's run id + restart count, or SPOTGPU_CKPT_SESSION)."""
    if env := os.environ.get(SESSION_ENV):
        return env
    if world_size == 1:
        return secrets.token_hex(6)
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id:
        raw = f"{run_id}r{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}".lower()
        token = "".join(ch for ch in raw if ch.isalnum())[:32]
        if token:
            return token
    raise ValueError(
        f"session: not set with world_size={world_size}; fix: pass session= (the same token on every rank, "
        f"e.g. broadcast from rank 0) or set {SESSION_ENV}"
    )


def _items(state: Mapping[str, Any]) -> list[Item]:
    """The state as items; a key that is not a non-empty str is one line with the fix."""
    if isinstance(state, Mapping):
        for key in state:
            if not isinstance(key, str) or not key:
                raise TypeError(
                    f"state key: {key!r} ({type(key).__name__}) is not a non-empty str; fix: use string keys "
                    f"(e.g. {{str(k): v for k, v in state.items()}}), or for nested/torch state "
                    "spotgpu.checkpoint.torch.torch_state(...)"
                )
    return normalize(state)


class CheckpointManager(PendingSave):
    """Save, restore, list, verify and garbage-collect checkpoint generations at ``url``."""

    def __init__(
        self,
        url: str,
        *,
        keep: int = 5,
        grace_seconds: float = 3600,
        memory_budget_bytes: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        session: str | None = None,
        store: Store | None = None,
        store_options: Mapping[str, Any] | None = None,
        hash_algorithm: str = DEFAULT_HASH,
        save_policy: SavePolicy | None = None,
        retention: RetentionPolicy | None = None,
        debris: DebrisPolicy | None = None,
        commit_timeout_seconds: float = 600.0,
        chunk_bytes: int = DEFAULT_CHUNK,
        agreement: writer.CommitAgreement | None = None,
        _unprotected_baseline: bool = False,
    ) -> None:
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size: {world_size!r} must be an int >= 1")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"rank: {rank!r} must be in [0, {world_size}); fix: pass this process's rank")
        new_hasher(hash_algorithm)  # fail now, not mid-save
        check_budget(memory_budget_bytes)
        #: The store's URL as messages show it (canonical, never with credentials).
        self.url = redact_url(url) if store is not None else parse_store_url(url).text
        #: Behind the retry rules of ``spotgpu.storage.resilient`` (a given store is wrapped too).
        self.store: Store = resilient(store if store is not None else open_store(url, **dict(store_options or {})))
        self.rank = rank
        self.world_size = world_size
        self.session = layout.check_session(session or _default_session(world_size))
        self.hash_algorithm = hash_algorithm
        self.save_policy = save_policy
        self.retention: RetentionPolicy = retention or KeepLast(keep)
        self.debris: DebrisPolicy = debris or GracePeriod(grace_seconds)
        self.commit_timeout_seconds = commit_timeout_seconds
        #: How the ranks learn each other's progress; None: through the store (polling).
        self.agreement = agreement
        chunk = min(chunk_bytes, memory_budget_bytes) if memory_budget_bytes else chunk_bytes
        self._budget = HostBudget(memory_budget_bytes)
        self._pool = ChunkPool(chunk, memory_budget_bytes)
        #: A one-shot stream gathered for a retry holds its bytes twice: only within the budget.
        self._gather_bytes = min(writer.GATHER_ONE_SHOT_BYTES, (memory_budget_bytes or 1 << 62) // 2)
        self._verified_steps: set[int] = set()
        self._in_flight: set[str] = set()
        self._pending: SaveHandle | None = None
        self._last_save: tuple[int, float] | None = None
        self._lock = threading.Lock()
        #: Seconds the last committed save of this manager took (the gang's budget estimate).
        self.last_save_seconds: float | None = None
        #: Where the coordinator's last commit spent its time (rank 0 only).
        self.last_commit: writer.CommitTimings | None = None
        #: Seconds this rank waited for the last marker (ranks other than the coordinator).
        self._last_wait: float | None = None
        #: bench/ckpt_gc_drill.py only: save without a lease or the pre-commit object check
        #: (the behaviour before issue 22), to measure what they prevent.
        self._unprotected_baseline = _unprotected_baseline

    # ---- saving -------------------------------------------------------------------

    def should_save(self, step: int) -> bool:
        """Ask the save policy (if none was given, every call says yes)."""
        if self.save_policy is None:
            return True
        last_step, last_time = self._last_save if self._last_save else (None, None)
        since = None if last_time is None else time.monotonic() - last_time
        return self.save_policy.should_save(step, last_saved_step=last_step, seconds_since_save=since)

    @property
    def peak_host_bytes(self) -> int:
        """The most host memory this manager's background snapshots held at once (``save_async``'s
        copy; never above ``memory_budget_bytes``). ``save`` and ``save_final`` copy nothing."""
        return self._budget.peak

    def save(self, step: int, state: Mapping[str, Any]) -> GenerationInfo:
        """Write and commit ``step`` now (straight from the caller's buffers, no copy);
        returns once the generation is committed. A running background save finishes first."""
        items = _items(state)
        self.wait_pending()
        return self._save(step, items, writer.direct_chunks)

    def save_async(self, step: int, state: Mapping[str, Any]) -> SaveHandle:
        """Copy ``state`` to host memory (blocking, within the budget), then write in the background.

        A previous background save is finished first, so saves commit in step order.
        """
        items = _items(state)
        self.wait_pending()
        handle = SaveHandle(layout.check_step(step))
        pipe = SnapshotPipe(self._budget, self._pool, handle.done, len(items))

        def run() -> None:
            try:
                info = self._save(step, items, pipe.chunks)
            except BaseException as err:  # reported through the handle
                pipe.drain()
                handle._finish(None, err)
            else:
                handle._finish(info, None)

        thread = threading.Thread(target=run, name=f"spotgpu-ckpt-save-{step}", daemon=True)
        thread.start()
        try:
            pipe.fill(items)
        finally:
            handle._set_writing()
            if handle.done():
                pipe.drain()
        self._pending = handle
        return handle

    def save_final(self, step: int, state: Mapping[str, Any], budget_seconds: float) -> FinalSaveResult:
        """The last save before preemption: write directly (training has stopped) within
        ``budget_seconds`` (the notice contract's final-checkpoint budget); report whether it
        committed in time. A save still running at the deadline is cancelled."""
        started = time.monotonic()
        if budget_seconds <= 0:
            return FinalSaveResult(False, 0.0, None, f"no time budget ({budget_seconds}s); nothing written")
        deadline = started + budget_seconds
        try:
            self.wait_pending(max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return FinalSaveResult(False, time.monotonic() - started, None, "a background save used the whole budget")
        except Exception as err:  # the last periodic save failed: the final save is the more urgent
            log.warning("background save failed before the final save: %s", err)
        items = _items(state)
        cancel = threading.Event()
        outcome: dict[str, Any] = {}
        phase = [writer.WRITING_OBJECTS]

        def run() -> None:
            try:
                outcome["info"] = self._save(
                    step,
                    items,
                    writer.direct_chunks,
                    cancelled=cancel.is_set,
                    phase=lambda p: phase.__setitem__(0, p),
                    deadline=deadline,
                )
            except BaseException as err:
                outcome["error"] = err

        if self.agreement is not None:
            # In the caller's thread: a save left running in the background would go on with
            # the agreement's collectives on a group the caller keeps using (the gang's outcome
            # all-reduce). Every rank checks the deadline at each chunk and before its part and
            # the commit, store retries stop at it, and the group carries each rank's outcome.
            cancel_at_deadline = lambda: time.monotonic() >= deadline  # noqa: E731
            try:
                outcome["info"] = self._save(
                    step, items, writer.direct_chunks, cancelled=cancel_at_deadline,
                    phase=lambda p: phase.__setitem__(0, p), deadline=deadline,
                )  # fmt: skip
            except writer.SaveCancelled:
                elapsed = time.monotonic() - started
                return FinalSaveResult(
                    False, elapsed, None, f"budget of {budget_seconds:.1f}s ran out while {phase[0]}; cancelled"
                )
            except Exception as err:
                return FinalSaveResult(False, time.monotonic() - started, None, f"failed: {err}")
            elapsed = time.monotonic() - started
            return FinalSaveResult(
                True, elapsed, outcome["info"].generation, f"committed in {elapsed:.2f}s of {budget_seconds:.1f}s"
            )
        thread = threading.Thread(target=run, name=f"spotgpu-ckpt-final-{step}", daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()))
        elapsed = time.monotonic() - started
        if thread.is_alive():
            cancel.set()
            return FinalSaveResult(
                False, elapsed, None, f"budget of {budget_seconds:.1f}s ran out while {phase[0]}; cancelled"
            )
        if "error" in outcome:
            return FinalSaveResult(False, elapsed, None, f"failed: {outcome['error']}")
        info: GenerationInfo = outcome["info"]
        return FinalSaveResult(True, elapsed, info.generation, f"committed in {elapsed:.2f}s of {budget_seconds:.1f}s")

    def _save(
        self,
        step: int,
        items: list[Item],
        chunks_for: writer.ChunkSource,
        cancelled: Any = None,
        phase: writer.PhaseHook = lambda _p: None,
        deadline: float | None = None,
    ) -> GenerationInfo:
        started = time.monotonic()
        generation = layout.generation_name(step, self.session)
        existing = self._existing_commit(step, generation)
        if existing is not None:
            return GenerationInfo.from_record(existing)
        with self._lock:
            self._in_flight.add(generation)
        try:
            shard_writer = writer.ShardWriter(
                self.store,
                generation,
                step,
                self.rank,
                self.world_size,
                self.hash_algorithm,
                deadline=deadline,
                phase=phase,
                agreement=self.agreement,
            )
            if self._unprotected_baseline:
                record = self._write_and_commit(shard_writer, items, chunks_for, cancelled, None)
            else:
                with writer.WriteLease(shard_writer.store, generation, self.rank) as lease:
                    record = self._write_and_commit(shard_writer, items, chunks_for, cancelled, lease)
        finally:
            with self._lock:
                self._in_flight.discard(generation)
        self._verified_steps.add(step)
        self._last_save = (step, time.monotonic())
        self.last_save_seconds = self._last_save[1] - started
        if self.rank == 0:
            self.last_commit = shard_writer.timings
            self._prune()
        return GenerationInfo.from_record(record)

    def _prune(self) -> None:
        """Enforce ``keep=`` after each commit. The save already committed, so a failed
        prune is logged, not raised (the next commit or ``gc`` tries again)."""
        try:
            self.gc()
        except Exception as err:
            log.warning("pruning %s after a commit failed: %s", self.url, err)

    def _write_and_commit(
        self,
        shard_writer: writer.ShardWriter,
        items: list[Item],
        chunks_for: writer.ChunkSource,
        cancelled: Any,
        lease: writer.WriteLease | None,
    ) -> CommitRecord:
        """Steps 1-9 of :class:`~spotgpu.checkpoint.writer.ShardWriter` for this rank."""
        step = shard_writer.step
        try:
            shard_writer.write(
                items, chunks_for, cancelled or (lambda: False), replayable=chunks_for is writer.direct_chunks,
                gather_bytes=self._gather_bytes,
            )  # fmt: skip
            if cancelled is not None and cancelled():
                raise writer.SaveCancelled(f"save of step {step} cancelled before its commit")
        except BaseException as err:
            shard_writer.written_or_failed(err)  # the coordinator and the waiting ranks stop at once
            raise
        if self.rank != 0:
            if lease is not None:
                lease.release()  # the coordinator's lease covers the generation until its marker
            # The first poll comes after most of the last save's wait: a periodic save of a
            # steady gang polls about once (a failed generation is still seen at that poll).
            first_wait = min(FIRST_WAIT_SHARE * (self._last_wait or 0.0), MAX_FIRST_WAIT_SECONDS)
            try:
                return shard_writer.wait(timeout=self.commit_timeout_seconds, first_wait=first_wait)
            finally:
                if shard_writer.waited is not None:
                    self._last_wait = shard_writer.waited
        return shard_writer.commit(
            timeout=self.commit_timeout_seconds,
            before_marker=lease.check if lease is not None else (lambda: None),
            check_objects=lease is not None,  # the unprotected baseline: no lease, no object check
        )

    def _existing_commit(self, step: int, generation: str) -> CommitRecord | None:
        """The marker already committed for ``step`` by this session (a retry), or None
        if the step is free. A step held by a generation that failed verification is
        freed (its marker retired) so the resumed run can save it again; one held by a
        healthy generation of another attempt raises :class:`CommitConflictError`."""
        try:
            existing = reader.read_commit(self.store, step)
        except ObjectMissingError:
            return None
        except VerificationError as err:  # the marker itself is unreadable
            self._retire_failed(step, None, str(err))
            return None
        if existing.generation == generation:
            return existing
        verdict = reader.failed_verdicts(self.store).get(step)
        if verdict is not None and verdict.generation in (None, existing.generation):
            self._retire_failed(step, existing.generation, verdict.reason)
            return None
        report = reader.verify_step(self.store, step)
        if not report.ok:
            self._retire_failed(step, existing.generation, "; ".join(report.problems))
            return None
        raise CommitConflictError(
            f"step {step} is already committed as {existing.generation}, which verifies; "
            "fix: resume from it (restore()) or save a later step"
        )

    def _record_failed(self, step: int, generation: str | None, reason: str) -> None:
        """Persist the verdict (``failed/<step>.json``): ``ckpt list`` shows the generation as
        failed and gc retires it first. Best effort: a store that refuses is only logged."""
        body = manifest.encode(manifest.FailedVerdict(step, generation, reason[:10_000]))
        try:
            self.store.put(layout.failed_path(step), body)
        except Exception as err:
            log.warning("could not record that step %s failed verification: %s", step, err)
        self._verified_steps.discard(step)

    def _retire_failed(self, step: int, generation: str | None, reason: str) -> None:
        """Free a failed step: its marker goes (objects become debris for gc), then its verdict."""
        log.warning("retiring step %s (%s), which failed verification: %s", step, generation or "unreadable", reason)
        self.store.delete(layout.commit_path(step))
        self.store.delete(layout.failed_path(step))
        self._verified_steps.discard(step)

    # ---- restoring and inspecting ---------------------------------------------------

    def restore(self, *, max_step: int | None = None, into: Mapping[str, Any] | None = None) -> RestoreResult | None:
        """This rank's state from the newest committed generation whose hashes all match.

        ``into``: existing arrays (same key, dtype and shape) to fill in place instead of
        allocating new ones; their contents are undefined if nothing verifies.

        Generations that fail (missing part, bad hash, malformed marker...) are skipped,
        reported in ``skipped`` and recorded as failed. A generation written by another
        world size raises :class:`WorldSizeMismatch` (on every rank). With several ranks, agree on a step first (e.g. all-reduce MIN of
        each rank's ``step``) and call again with ``max_step`` if they differ.
        """
        skipped: list[tuple[str, str]] = []
        for step in reader.committed_steps(self.store):
            if max_step is not None and step > max_step:
                continue
            label = f"step {step}"
            generation: str | None = None
            try:
                record = reader.read_commit(self.store, step)
                label = generation = record.generation
                if record.world_size != self.world_size:
                    raise WorldSizeMismatch(
                        f"world_size: generation {record.generation} (step {step}) was written by "
                        f"{record.world_size} rank(s), this job has {self.world_size}; fix: restore it through "
                        f"spotgpu.checkpoint.dcp (which reshards), or relaunch with {record.world_size} rank(s)"
                    )
                state = reader.load_rank(self.store, record, self.rank, into)
            except ObjectMissingError:
                continue  # the marker was retired after the listing: not a candidate any more
            except VerificationError as err:
                log.warning("skipping %s: %s", label, err)
                skipped.append((label, str(err)))
                self._record_failed(step, generation, str(err))
                continue
            self._verified_steps.add(step)
            return RestoreResult(step, state, record.generation, skipped)
        if skipped:
            log.error("no committed generation verified at %s; skipped %s", self.url, skipped)
        return None

    def list(self) -> list[GenerationInfo]:
        """Committed generations (``failed`` set once one failed verification), then
        uncommitted debris, newest step first."""
        infos: list[GenerationInfo] = []
        committed: set[str] = set()
        verdicts = reader.failed_verdicts(self.store)
        for step in reader.committed_steps(self.store):
            try:
                record = reader.read_commit(self.store, step)
            except ObjectMissingError:
                continue  # retired after the listing
            except VerificationError as err:
                infos.append(GenerationInfo(f"step {step}", step, True, failed=str(err)))
                continue
            committed.add(record.generation)
            info = GenerationInfo.from_record(record)
            verdict = verdicts.get(step)
            if verdict is not None and verdict.generation in (None, record.generation):
                info = replace(info, failed=verdict.reason)
            infos.append(info)
        sizes: dict[str, int] = {}
        for obj in (o for area in layout.OBJECT_AREAS for o in self.store.list(area + "/")):
            gen = layout.generation_of(obj.path)
            if gen and gen not in committed:
                sizes[gen] = sizes.get(gen, 0) + obj.size
        for gen, size in sizes.items():
            parsed = layout.parse_generation(gen)
            infos.append(GenerationInfo(gen, parsed.step if parsed else -1, False, total_bytes=size))
        return sorted(infos, key=lambda i: (i.step, i.committed), reverse=True)

    def verify(self, generation: str | int) -> VerifyReport:
        """Read and hash every object of a committed generation (name or step)."""
        if isinstance(generation, int) or str(generation).isdigit():
            step = int(generation)
        else:
            parsed = layout.parse_generation(str(generation))
            if parsed is None:
                return VerifyReport(str(generation), None, False, [f"{generation!r} is not a generation name"])
            step = parsed.step
        report = reader.verify_step(self.store, step)
        if not report.ok and not report.missing:
            self._record_failed(step, report.committed_generation, "; ".join(report.problems))
        if (
            report.ok
            and not isinstance(generation, int)
            and not str(generation).isdigit()
            and report.generation != generation
        ):
            report.ok = False
            report.problems.append(f"{generation} is not committed (step {step} is committed as {report.generation})")
        if report.ok:
            self._verified_steps.add(step)
        return report

    # ---- retention ------------------------------------------------------------------

    def newest_verified_step(self) -> int | None:
        """The newest committed step that verifies (cached for steps this manager checked)."""
        return self._newest_verified(record_failures=True)

    def _newest_verified(self, record_failures: bool) -> int | None:
        failed = self._failed_steps(self._commits())
        for step in reader.committed_steps(self.store):
            if step in self._verified_steps:
                return step
            if step in failed:
                continue
            report = reader.verify_step(self.store, step)
            if report.ok:
                self._verified_steps.add(step)
                return step
            if record_failures and not report.missing:
                self._record_failed(step, report.committed_generation, "; ".join(report.problems))
        return None

    def _commits(self) -> dict[int, str | None]:
        """Committed step -> the generation its marker names (None: the marker is unreadable)."""
        commits: dict[int, str | None] = {}
        for step in reader.committed_steps(self.store):
            try:
                commits[step] = reader.read_commit(self.store, step).generation
            except ObjectMissingError:
                continue  # retired meanwhile
            except VerificationError:
                commits[step] = None
        return commits

    def _failed_steps(self, commits: Mapping[int, str | None]) -> set[int]:
        """Committed steps known to have failed: an unreadable marker, or a verdict naming
        the generation the marker names now (a stale verdict for a re-saved step is ignored)."""
        verdicts = reader.failed_verdicts(self.store)
        return {
            s
            for s, gen in commits.items()
            if gen is None or (s in verdicts and verdicts[s].generation in (None, gen))
        }

    def _live_now(self, generations: set[str]) -> set[str]:
        """A fresh look, right before deleting debris: which of ``generations`` has a writer at
        work (a live lease), or committed since the listing? One listing for all of them."""
        if not generations:
            return set()
        now = dt.datetime.now(dt.UTC)
        live = {
            gen
            for area in layout.OBJECT_AREAS
            for info in self.store.list(area + "/")
            if (gen := layout.generation_of(info.path)) in generations
            and layout.shows_a_live_writer(info.path)
            and (now - info.last_modified).total_seconds() < layout.LEASE_TTL_SECONDS
        }
        for gen in generations - live:
            parsed = layout.parse_generation(gen)
            if parsed is None:
                continue
            try:
                if reader.read_commit(self.store, parsed.step).generation == gen:
                    live.add(gen)
            except ObjectMissingError:
                continue
            except VerificationError:
                live.add(gen)  # an unreadable marker for that step: leave it to the failed-step rules
        return live

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Apply retention: retire generations that failed verification first, keep the
        policy's generations and the newest verified one, retire the rest (commit marker
        first), delete uncommitted debris older than the grace period, never a generation
        whose writer holds a live lease. ``dry_run``: report what would go, delete nothing."""
        # Objects before markers: a save that commits (and drops its lease) after this
        # listing shows up committed in the marker listing below, never as leaseless debris.
        areas = (*layout.OBJECT_AREAS, layout.COMMITS, layout.FAILED)
        objects = tuple(info for area in areas for info in self.store.list(area + "/"))
        commits = self._commits()
        newest_verified = self._newest_verified(record_failures=not dry_run)
        failed = self._failed_steps(commits)
        with self._lock:
            in_flight = set(self._in_flight)
        plan = plan_gc(
            StoreSnapshot(commits, objects),
            retention=self.retention,
            debris=self.debris,
            newest_verified_step=newest_verified,
            now=dt.datetime.now(dt.UTC),
            in_flight=in_flight,
            failed_steps=failed,
            lease_ttl_seconds=0.0 if self._unprotected_baseline else layout.LEASE_TTL_SECONDS,
        )
        deleted = len(plan.delete_paths)
        if not dry_run:
            deleted = self._apply(plan)
        return GcReport(
            retired=[commits[s] or f"step {s}" for s in plan.retire_steps],
            deleted_debris=plan.debris_generations,
            deleted_objects=deleted,
            kept=[commits[s] or f"step {s}" for s in plan.kept_steps],
            young_debris=plan.young_debris_generations,
            live_writers=plan.live_generations,
            newest_verified=commits.get(newest_verified) if newest_verified is not None else None,
            failed=[commits[s] or f"step {s}" for s in plan.failed_steps],
            dry_run=dry_run,
            would_delete=list(plan.delete_paths) if dry_run else [],
        )

    def _apply(self, plan: GcPlan) -> int:
        """Delete what ``plan`` says: markers first, then objects (in batches where the store
        has a bulk delete); a debris generation whose writer renewed its lease since the
        listing, or that committed meanwhile, is spared (one fresh look right before)."""
        for step in plan.retire_steps:
            self.store.delete(layout.commit_path(step))
            self._verified_steps.discard(step)
        debris = set(plan.debris_generations)
        live = set() if self._unprotected_baseline else self._live_now(debris)
        paths = [p for p in plan.delete_paths if layout.generation_of(p) not in live]
        self.store.delete_many(paths)
        plan.debris_generations = [g for g in plan.debris_generations if g not in live]
        plan.live_generations += sorted(live)
        return len(paths)
