"""TieredCheckpointManager: the CheckpointManager calls, with a node-local tier and peer copies in front.

Three threads of each rank take part, and each of the tier's two gloo groups (both made at
construction, by every rank, in the same order) has exactly one thread that uses it:

- the **training thread** calls ``save``, ``save_async``, ``save_final`` and ``restore``; it uses the
  tier's *restore group* (``link``) for the construction handshake and for restores;
- the **save thread** (:class:`.background.SaveThread`) runs every local commit, one at a time in
  the order they were queued; it is the only user of the *save group* (``save_link``), so its
  collectives never interleave with training's (the job's own group) or a restore's;
- the **upload thread** (:mod:`.uploads`) copies generations to the object store; it holds no collective.

The call order of one periodic save (every rank, the same steps in the same order):

1. **Wait for the previous save** (training thread). At most one save is in flight: host memory
   holds one copy, and local commits happen in step order. Its error, if it failed, is raised
   here (once). A save that cannot keep up with the interval slows training here, never skips.
2. **Host copy** (training thread, ``save_async`` only). The state is copied in chunks into pooled
   host buffers (``CheckpointManager.save_async`` of the node's world-size-1 manager, reused from
   save to save) while a writer thread streams them into step 3; the commit is queued for the save
   thread. Within ``memory_budget_bytes`` (or without one) the copy is all training waits for; over
   it, the copy waits for the writer to free chunks, so training waits until all but the last
   budget's worth of the state is written. ``save`` queues the caller's own buffers instead (no
   copy) and waits for step 6.
3. **Local write** (the writer thread; the save thread waits for it). The state becomes a committed
   world-size-1 generation in the node's tier (``r<rank>/`` of :mod:`.node`: hashes, a create-only
   marker, the store's guarantees).
4. **Agree who copies** (save thread, a gather on the save group): only a rank whose write
   committed sends.
5. **Peer copies** (save thread, point-to-point on the save group). Each rank sends its
   generation's files to its partners (:func:`.plan.partners`: the next ranks of a ring that
   alternates zones; :mod:`.transport`); each partner **checks every block as it arrives**
   (:mod:`.arrival`: against the part that came first, which the marker, last, vouches for)
   and only then moves the copy into its tier. A copy that fails is not written on, not moved
   in, not counted.
6. **Local commit** (save thread, a second gather). If every rank's own write committed, every
   node writes the same gang marker naming the verified holders of each shard: the generation
   counts now, and the save's handle is committed (``save`` returns). Otherwise the save fails on
   every rank (the ranks whose write failed are named). A rank lost anywhere in 3-6 leaves no
   marker on any node (each needs every rank's answer to this gather), so the generation does
   not count and a restore takes the newest one that does.
7. **Durable copy** (save thread queues, upload thread runs). Every ``durable_every``-th local
   commit goes to the object store (:mod:`.uploads`: the rank's committed files in the tier,
   checked and mapped read-only (:mod:`.mapped`), through the store's own protocol); nothing waits
   for it.
8. **Retention** (save thread). Each node keeps the newest ``keep`` gang-committed generations and
   the newest durable one (survivors of a fall-back to the store read it locally).

Restore (training thread, collectively, after the save thread finished what was queued): each rank
lists what its tier holds, rank 0 lists the store's committed generations; every rank computes the
same plan (:func:`.plan.choose_restore`: the newest step every rank can get, each rank's nearest
source: ``local``, a ``peer`` that sends it the files, or the ``store``); each reads and verifies;
if any rank's copy fails (a bad hash, a missing file), every rank learns which copy and why, it is
never planned again, and the gang plans again. The result says where this rank's state came from,
how long it took and how many bytes it read.

The final save after a notice (training thread, every rank): wait for the save in flight, within the
budget (its collectives must end before the final save's begin; they end on every rank together).
If it was of the same step and committed, it is the final save; otherwise the final save is queued
like a periodic one from the caller's buffers (training has stopped) and awaited through step 6.
Then the upload, within what is left of the budget. A rank whose budget runs out first reports the
final save not committed; the gang's outcome agreement then says so on every rank.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.async_save import PendingSave, SaveHandle
from spotgpu.checkpoint.errors import CheckpointError
from spotgpu.checkpoint.manager import CheckpointManager
from spotgpu.checkpoint.policies import SavePolicy
from spotgpu.checkpoint.results import FinalSaveResult, GenerationInfo, RestoreResult
from spotgpu.checkpoint.snapshot import check_budget
from spotgpu.checkpoint.tiered.arrival import ArrivalCheck
from spotgpu.checkpoint.tiered.background import SaveThread
from spotgpu.checkpoint.tiered.config import LocalTier
from spotgpu.checkpoint.tiered.node import GangMarker, NodeTier
from spotgpu.checkpoint.tiered.plan import LOCAL, PEER, STORE, Held, Inventory, RestorePlan, choose_restore, partners
from spotgpu.checkpoint.tiered.transport import GroupLink, Link, SoloLink
from spotgpu.checkpoint.tiered.uploads import Upload, Uploader
from spotgpu.checkpoint.writer import CommitAgreement

log = logging.getLogger(__name__)

#: What the save thread commits: the caller's buffers (``save``, ``save_final``), the local write ``save_async``
#: started, or the error that stopped this rank's host copy.
_Local = Mapping[str, Any] | SaveHandle | BaseException
#: A restore plans again at most this many times (each round rules out at least one bad copy).
MAX_RESTORE_ROUNDS = 8
#: Committed store generations rank 0 offers a restore (newest first).
STORE_CANDIDATES = 8


class TieredCheckpointManager(PendingSave):
    """Save and restore through the node's local tier, its peers and the object store at ``url``.

    ``tier`` None (no local tier on this VM): every call goes straight to a plain
    :class:`CheckpointManager` at ``url``. ``link`` and ``save_link``: how the ranks talk on the
    training thread and on the save thread (default: two gloo groups over the job's process group
    when ``world_size`` > 1; see the module docstring for who uses which). ``agreement`` (e.g.
    ``Gang.commit_agreement()``) serves that plain manager only: with a tier, the store's saves run
    in the upload thread, which holds no collective (a slow rank's upload never holds another
    rank's save thread), so they poll the store for the marker instead. Other keywords go to the
    store's manager.

    ``memory_budget_bytes`` (default: the tier's, :class:`LocalTier`; None: no bound) has
    ``CheckpointManager``'s name and meaning: the most host memory this rank's background save
    holds for its copy of the state. ``save_async`` copies the state into pooled chunks of at
    most that many bytes in all and never holds more (``peak_host_bytes`` says how many it held).
    A state within the budget is copied whole and ``save_async`` returns: the local write, the
    peer copies and the upload run in the background. A larger state costs training time instead
    of memory: the local write streams from the chunks while the caller's thread copies the next
    ones, and ``save_async`` returns once the last chunk is copied (at most the budget's worth of
    the state is still to write). The peer copies and the upload never read the copy: they read
    the committed local files (the transport through two chunks per partner, the upload through a
    read-only map). The commit protocol, its checks and restores are the same either way.
    """

    def __init__(
        self,
        url: str,
        tier: LocalTier | None,
        *,
        rank: int = 0,
        world_size: int = 1,
        session: str | None = None,
        save_policy: SavePolicy | None = None,
        link: Link | None = None,
        save_link: Link | None = None,
        agreement: CommitAgreement | None = None,
        memory_budget_bytes: int | None = None,
        **store_kwargs: Any,
    ) -> None:
        self.url, self.rank, self.world_size = url, rank, world_size
        self.tier = tier
        #: host memory a background save may hold for its copy of the state (None: a whole copy)
        self.memory_budget_bytes = check_budget(
            memory_budget_bytes if memory_budget_bytes is not None or tier is None else tier.memory_budget_bytes
        )
        self.save_policy = save_policy
        self.store_kwargs = store_kwargs
        #: seconds the last local commit took (steps 3-6; the gang's estimate of a final save)
        self.last_save_seconds: float | None = None
        #: seconds the last save call held the training thread (``save_async``: the wait and the host copy)
        self.last_blocked_seconds: float | None = None
        #: seconds of the last local commit's steps: ``write`` (the local write, hashing included), ``agree``
        #: (who copies), ``copies`` (sending and receiving), ``check`` (of which: the blocks checked as they
        #: landed), ``verify`` (the copies' markers and parts), ``commit`` (the second gather, the gang marker)
        self.last_save_phases: dict[str, float] = {}
        self._last_save: tuple[int, float] | None = None
        self._saves = 0
        self._pending: SaveHandle | None = None
        self._last_marker: GangMarker | None = None
        if tier is None:
            self.plain: CheckpointManager | None = CheckpointManager(
                url, rank=rank, world_size=world_size, session=session, save_policy=save_policy,
                agreement=agreement, memory_budget_bytes=self.memory_budget_bytes, **store_kwargs,
            )  # fmt: skip
            return
        self.plain = None
        solo = world_size == 1
        self.link: Link = link or (SoloLink() if solo else GroupLink())
        self.save_link: Link = save_link or (SoloLink() if solo else GroupLink())
        mine = {"session": session or secrets.token_hex(6), "zone": tier.zone, "dir": str(tier.path)}
        everyone = self.link.all_gather(mine)
        self.session = layout.check_session(everyone[0]["session"])  # rank 0's token: one generation name for all
        self.zones: list[str] = [str(g["zone"]) for g in everyone]
        self.dirs: list[str] = [str(g["dir"]) for g in everyone]
        self.partners = partners(self.zones, tier.peer_copies)
        self.node = NodeTier(tier.path, url, tier.keep)
        self.uploader = Uploader(self.node, self._store)
        self.saver = SaveThread()
        #: this rank's shard in the node's tier: every save's local write, and the budgeted host copy
        self._local = self.node.manager(rank, self.session, self.memory_budget_bytes)

    @property
    def peak_host_bytes(self) -> int:
        """The most host memory this rank's background saves held at once for their copy of the state
        (never above ``memory_budget_bytes``); ``save`` and ``save_final`` copy nothing."""
        return (self.plain or self._local).peak_host_bytes

    # -- the store's manager ----------------------------------------------------------------
    def _store(self, session: str | None = None) -> CheckpointManager:
        return CheckpointManager(self.url, rank=self.rank, world_size=self.world_size,
                                 session=session or self.session, **self.store_kwargs)  # fmt: skip

    # -- saving -------------------------------------------------------------------------------
    def should_save(self, step: int) -> bool:
        if self.plain is not None:
            return self.plain.should_save(step)
        if self.save_policy is None:
            return True
        last_step, last_time = self._last_save if self._last_save else (None, None)
        since = None if last_time is None else time.monotonic() - last_time
        return self.save_policy.should_save(step, last_saved_step=last_step, seconds_since_save=since)

    def save(self, step: int, state: Mapping[str, Any]) -> GenerationInfo:
        """Commit ``step`` to the local tiers of the gang and return once it counts (steps 1, 3-8 of the
        module docstring, from the caller's buffers); every rank calls it."""
        if self.plain is not None:
            return self.plain.save(step, state)
        started = time.monotonic()
        self.wait_pending()
        handle = self._queue(step, state, periodic=True)
        try:
            return handle.wait()
        finally:
            self._pending = None
            self.last_blocked_seconds = time.monotonic() - started

    def save_async(self, step: int, state: Mapping[str, Any]) -> SaveHandle:
        """Copy ``state`` to host memory (within ``memory_budget_bytes``: over it, the local write streams
        while the copy goes on) and return; the rest of the local write, the peer copies and the local
        commit run in the background (steps 1-8 of the module docstring). The handle is committed when
        the generation counts (every rank's write and copies verified); every rank calls it."""
        if self.plain is not None:
            return self.plain.save_async(step, state)
        started = time.monotonic()
        self.wait_pending()
        layout.check_step(step)
        copying = time.monotonic()
        try:
            local: _Local = self._local.save_async(step, state)
        except Exception as err:  # the others must still hear from us: the save fails on every rank, naming this one
            local = err
        handle = self._queue(step, local, periodic=True, write_started=copying)
        self.last_blocked_seconds = time.monotonic() - started
        return handle

    def wait_pending(self, timeout: float | None = None) -> None:
        """Without a tier, the plain manager's save in flight; else this one's (:class:`PendingSave`)."""
        if self.plain is not None:
            self.plain.wait_pending(timeout)
            return
        super().wait_pending(timeout)

    def _queue(self, step: int, state: _Local, *, periodic: bool, write_started: float | None = None) -> SaveHandle:
        """Queue the local commit of ``step`` for the save thread (step 2)."""
        handle = SaveHandle(step)
        self._pending = handle
        self._last_save = (step, time.monotonic())
        self.saver.submit(lambda: self._commit_local(step, state, periodic, write_started), handle)
        return handle

    def _commit_local(self, step: int, state: _Local, periodic: bool, write_started: float | None) -> GenerationInfo:
        """Steps 3-8, on the save thread."""
        assert self.tier is not None
        started = time.monotonic() if write_started is None else write_started
        info, marker = self._save_local(step, state, started)
        self._last_marker = marker
        self.last_save_seconds = time.monotonic() - started
        if periodic:
            self._saves += 1
            if self._saves % self.tier.durable_every == 0:
                self.uploader.submit(step, info.generation, self.rank)
        self.node.prune(self.session)
        return info

    def _save_local(self, step: int, state: _Local, started: float) -> tuple[GenerationInfo, GangMarker]:
        """Steps 3-6 of ``state``: the caller's buffers (written now), the local write ``save_async`` started
        (awaited), or the error that stopped this rank's host copy (reported in the gathers). The ``write``
        phase counts from ``started`` (``save_async``: the copy's start, so it is never less than a direct
        write of the same state, the gang's estimate of a final save)."""
        generation = layout.generation_name(step, self.session)
        error: str | None = None
        info: GenerationInfo | None = None
        phases: dict[str, float] = {}
        try:
            if isinstance(state, BaseException):
                raise state
            if isinstance(state, SaveHandle):
                self._local.wait_pending()  # the local write's error, raised here once (not at the next save)
                info = state.wait(0)
            else:
                info = self._local.save(step, state)
        except Exception as err:  # the others must still hear from us
            error = f"{type(err).__name__}: {err}"
        phases["write"] = time.monotonic() - started
        started = time.monotonic()
        wrote = self.save_link.all_gather(error is None)
        phases["agree"] = time.monotonic() - started
        held = self._copy_to_peers(step, generation, wrote, phases)
        started = time.monotonic()
        outcomes = self.save_link.all_gather({"error": error, "held": held})
        failed = {r: o["error"] for r, o in enumerate(outcomes) if o["error"]}
        if failed:
            self.last_save_phases = phases
            raise CheckpointError(f"local save of step {step} failed on rank(s) {sorted(failed)}: "
                                  + "; ".join(f"rank {r}: {e}" for r, e in sorted(failed.items())))  # fmt: skip
        holders = {shard: sorted(r for r, o in enumerate(outcomes) if o["held"].get(shard)) for shard in range(self.world_size)}
        marker = GangMarker(step, generation, self.world_size, holders, self.zones, self.dirs)
        self.node.write_marker(marker)
        phases["commit"] = time.monotonic() - started
        self.last_save_phases = phases
        assert info is not None
        return info, marker

    def _copy_to_peers(self, step: int, generation: str, wrote: list[bool], phases: dict[str, float]) -> dict[int, bool]:
        """Send this rank's generation to its partners, receive (checked as it lands) the ones it holds;
        which verified."""
        sends: dict[int, tuple[Path, list[Path]]] = {}
        if wrote[self.rank]:
            files = self.node.generation_files(self.rank, step, generation)
            sends = {holder: (self.node.shard_root(self.rank), files) for holder in self.partners[self.rank]}
        owners = [o for o, hs in self.partners.items() if self.rank in hs and wrote[o]]
        staged = {owner: self.node.incoming(generation, owner) for owner in owners}
        checks = {owner: ArrivalCheck(step, generation) for owner in owners}
        started = time.monotonic()
        received = self.save_link.exchange(sends, staged, checks)
        phases["copies"] = time.monotonic() - started
        phases["check"] = sum(c.seconds for c in checks.values())
        started = time.monotonic()
        verified: dict[int, bool] = {}
        for owner, files in received.items():
            report = checks[owner].verify(staged[owner])
            verified[owner] = report.ok
            if verified[owner]:
                self.node.accept(staged[owner], owner, files)
            else:
                self.node.discard(staged[owner])
                log.warning("copy of rank %s's step %s failed verification on arrival: %s", owner, step,
                            "; ".join(report.problems))  # fmt: skip
        phases["verify"] = time.monotonic() - started
        return verified

    def save_final(self, step: int, state: Mapping[str, Any], budget_seconds: float) -> FinalSaveResult:
        """The last save before preemption: to the local tier and the peers first, then to the store
        within what is left of ``budget_seconds`` (every rank calls it; see the module docstring)."""
        if self.plain is not None:
            return self.plain.save_final(step, state, budget_seconds)
        started = time.monotonic()
        if budget_seconds <= 0:
            return FinalSaveResult(False, 0.0, None, f"no time budget ({budget_seconds}s); nothing written")
        deadline = started + budget_seconds

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        previous = self._pending
        if previous is not None and not previous.finished(left()):
            return FinalSaveResult(False, time.monotonic() - started, None,
                                   f"the save of step {previous.step} in flight used the whole budget "
                                   f"({budget_seconds:.1f}s); nothing more written")  # fmt: skip
        self._pending = None
        if previous is not None and previous.error is not None:
            log.warning("the save of step %s failed before the final save: %s", previous.step, previous.error)
        if previous is not None and previous.step == step and previous.error is None:
            info, how = previous.wait(0), "committed in the background before the notice"
        else:
            handle = self._queue(step, state, periodic=False)
            if not handle.finished(left()):
                return FinalSaveResult(False, time.monotonic() - started, None,
                                       f"budget of {budget_seconds:.1f}s ran out while committing to the local "
                                       "tier and the peers; nothing counts")  # fmt: skip
            self._pending = None
            if handle.error is not None:
                return FinalSaveResult(False, time.monotonic() - started, None, f"failed: {handle.error}")
            info = handle.wait(0)
            how = f"in {time.monotonic() - started:.2f}s"
        marker = self._last_marker
        copies = len(marker.holders.get(self.rank, [])) if marker is not None and marker.step == step else 0
        upload = self.uploader.submit(step, info.generation, self.rank)
        upload.done.wait(left())
        elapsed = time.monotonic() - started
        store = _store_outcome(upload)
        return FinalSaveResult(True, elapsed, info.generation,
                               f"committed to the local tier and {copies} peer cop(ies) {how}; the object "
                               f"store: {store} ({elapsed:.2f}s of {budget_seconds:.1f}s)")  # fmt: skip

    # -- restoring -------------------------------------------------------------------------------
    def restore(self, *, max_step: int | None = None, into: Mapping[str, Any] | None = None) -> RestoreResult | None:
        """This rank's state of the newest step every rank can get, from the nearest verified copy (collective)."""
        if self.plain is not None:
            return self.plain.restore(max_step=max_step, into=into)
        self._settle()
        started = time.monotonic()
        offered = self._store_generations() if self.rank == 0 else None
        mine = [(h.step, h.generation, h.shard) for h in self.node.inventory(self.world_size)]
        gathered = self.link.all_gather({"held": mine, "store": offered})
        inventory = Inventory(self.world_size, [[Held(*h) for h in g["held"]] for g in gathered],
                              gathered[0]["store"] or [])  # fmt: skip
        notes: list[str] = []
        for _ in range(MAX_RESTORE_ROUNDS):
            plan = choose_restore(inventory, max_step)
            if plan is None:  # nothing every rank can get: a fresh start, and the tier's old timeline goes
                self.node.drop_newer(-1, self.session)
                return None
            result, problem = self._read(plan, into)
            outcomes = self.link.all_gather(problem)
            bad = [(r, p) for r, p in enumerate(outcomes) if p is not None]
            if not bad:
                assert result is not None
                self.node.drop_newer(plan.step, self.session)
                source = plan.sources[self.rank]
                nbytes = sum(_nbytes(v) for v in result.state.values())
                return RestoreResult(result.step, result.state, result.generation, result.skipped, source.kind,
                                     time.monotonic() - started, nbytes, tuple(notes))  # fmt: skip
            for rank, problem_doc in bad:
                source = plan.sources[rank]
                what = {LOCAL: "its own tier's copy", PEER: f"rank {source.holder}'s copy",
                        STORE: "the store's generation"}[source.kind]  # fmt: skip
                notes.append(f"rank {rank}: {what} of step {plan.step} was not used: {problem_doc}")
                if source.kind == STORE:
                    inventory.bad_store.add(plan.step)
                else:
                    holder = rank if source.kind == LOCAL else source.holder
                    assert holder is not None
                    inventory.bad.add((plan.step, plan.generation, rank, holder))
            log.warning("restore of step %s planned again: %s", plan.step, notes[-len(bad):])
        raise CheckpointError(f"restore: no plan held after {MAX_RESTORE_ROUNDS} rounds: {'; '.join(notes)}")

    def _store_generations(self) -> list[tuple[int, str]]:
        """The store's committed generations of this world size (rank 0 reads them once for the gang)."""
        infos = [i for i in self._store().list() if i.committed and not i.failed and i.world_size == self.world_size]
        return [(i.step, i.generation) for i in infos[:STORE_CANDIDATES]]

    def _read(self, plan: RestorePlan, into: Mapping[str, Any] | None) -> tuple[RestoreResult | None, str | None]:
        """Send the copies others need from us, read ours from its source; (result, None) or (None, why not)."""
        sends = {r: (self.node.shard_root(r), self.node.generation_files(r, plan.step, plan.generation))
                 for r in plan.sends(self.rank)}  # fmt: skip
        mine = plan.sources[self.rank]
        staged = {mine.holder: self.node.incoming(plan.generation, self.rank)} if mine.kind == PEER else {}
        try:
            received = self.link.exchange(sends, staged)  # type: ignore[arg-type]
        except Exception as err:  # pragma: no cover - a peer that vanished: the gang's collective fails too
            return None, f"the copy did not arrive: {err}"
        session = plan.generation.split("-", 1)[1]
        if mine.kind == LOCAL:
            source = self.node.manager(self.rank, session)
        elif mine.kind == PEER:
            source = CheckpointManager(staged[mine.holder].as_uri(), rank=0, world_size=1, session=session)
        else:
            source = self._store(session)
        try:
            result = source.restore(max_step=plan.step, into=into)
        except Exception as err:
            return None, f"{type(err).__name__}: {err}"
        if result is None or result.generation != plan.generation:
            why = [w for g, w in (result.skipped if result else []) if g == plan.generation]
            if not why:  # restore found nothing at all: ask the generation itself what is wrong
                why = source.verify(plan.step).problems
            return None, f"generation {plan.generation} did not verify: {'; '.join(why) or 'not found'}"
        if mine.kind == PEER and mine.holder is not None:  # this node now holds its shard too
            self.node.accept(staged[mine.holder], self.rank, received.get(mine.holder, []))
        return result, None

    def _settle(self) -> None:
        """Let the save in flight end before the tier is read (a failure was the save's to report)."""
        try:
            self.wait_pending()
        except Exception as err:
            log.warning("the save in flight failed: %s", err)

    def close(self, timeout: float | None = None) -> None:
        """Let the save in flight and queued uploads finish (up to ``timeout`` each)."""
        if self.plain is None:
            try:
                self.wait_pending(timeout)
            except Exception as err:
                log.warning("the save in flight failed: %s", err)
            self.saver.close(timeout)
            self.uploader.close(timeout)

    def uploads(self) -> list[Upload]:
        """The background uploads that ended (``error`` None: the store committed them)."""
        return [] if self.plain is not None else [*self.uploader.completed]

    # -- the durable view (last in the class: its name would shadow ``list`` in later annotations) ---------
    def list(self) -> list[GenerationInfo]:
        """The store's generations (``CheckpointManager.list``): what survives every node."""
        return (self.plain or self._store()).list()


def _store_outcome(upload: Upload) -> str:
    if not upload.done.is_set():
        return "upload not finished in the budget (it goes on)"
    if upload.error is not None:
        return f"upload failed ({upload.error})"
    return f"committed in {upload.seconds:.2f}s"


def _nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    return 0
