"""TieredCheckpointManager: the CheckpointManager calls, with a node-local tier and peer copies in front.

The call order of one periodic save (every rank, the same step):

1. **Local write.** The rank saves its state as a committed world-size-1 generation in its
   node's tier (``r<rank>/`` of :mod:`.node`: hashes, a create-only marker, the same guarantees
   as the store). Training is blocked for this write only (the copies are fast and local).
2. **Agree who copies.** A gather of the ranks' outcomes: only a rank whose write committed sends.
3. **Peer copies.** Each rank sends its generation's files to its partners (:func:`.plan.partners`:
   the next ranks of a ring that alternates zones) over the tier's gloo group (:mod:`.transport`);
   each partner stages what arrives, **verifies every hash** (``CheckpointManager.verify``), and only
   then moves it into its tier.
4. **Local commit.** A second gather: if every rank's own write committed, every node writes the
   same gang marker, naming the verified holders of each shard; the generation now counts.
   Otherwise the save raises on every rank (the ranks whose write failed are named).
5. **Durable copy.** Every ``durable_every``-th local commit is queued for the object store
   (:mod:`.uploads`: the rank's own shard, read back verified, through the store's own protocol);
   training does not wait for it.
6. **Retention.** Each node keeps the newest ``keep`` gang-committed generations and the newest
   durable one (survivors of a fall-back to the store read it locally).

Restore (every rank, collectively): each rank lists what its tier holds, rank 0 lists the store's
committed generations; every rank computes the same plan (:func:`.plan.choose_restore`: the newest
step every rank can get, each rank's nearest source: ``local``, a ``peer`` that sends it the files,
or the ``store``); each reads and verifies; if any rank's copy fails (a bad hash, a missing file),
every rank learns which copy and why, it is never planned again, and the gang plans again. The
result says where this rank's state came from, how long it took and how many bytes it read.

A final save after a notice commits to the local tier and the peers first (fast), then uploads
to the store within what is left of the budget.
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
from spotgpu.checkpoint.async_save import SaveHandle
from spotgpu.checkpoint.errors import CheckpointError
from spotgpu.checkpoint.manager import CheckpointManager
from spotgpu.checkpoint.policies import SavePolicy
from spotgpu.checkpoint.results import FinalSaveResult, GenerationInfo, RestoreResult
from spotgpu.checkpoint.tiered.config import LocalTier
from spotgpu.checkpoint.tiered.node import GangMarker, NodeTier
from spotgpu.checkpoint.tiered.plan import LOCAL, PEER, STORE, Held, Inventory, RestorePlan, choose_restore, partners
from spotgpu.checkpoint.tiered.transport import GroupLink, Link, SoloLink
from spotgpu.checkpoint.tiered.uploads import Upload, Uploader
from spotgpu.checkpoint.writer import CommitAgreement

log = logging.getLogger(__name__)

#: A restore plans again at most this many times (each round rules out at least one bad copy).
MAX_RESTORE_ROUNDS = 8
#: Committed store generations rank 0 offers a restore (newest first).
STORE_CANDIDATES = 8


class TieredCheckpointManager:
    """Save and restore through the node's local tier, its peers and the object store at ``url``.

    ``tier`` None (no local tier on this VM): every call goes straight to a plain
    :class:`CheckpointManager` at ``url``. ``link``: how the ranks talk (default: a gloo group
    over the job's process group when ``world_size`` > 1). ``agreement`` (e.g.
    ``Gang.commit_agreement()``) serves that plain manager only: with a tier, the store's saves run
    in the uploader's thread, where a collective on the job's group could interleave with
    training's, so they poll the store for the marker instead. Other keywords go to the store's manager.
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
        agreement: CommitAgreement | None = None,
        **store_kwargs: Any,
    ) -> None:
        self.url, self.rank, self.world_size = url, rank, world_size
        self.tier = tier
        self.save_policy = save_policy
        self.store_kwargs = store_kwargs
        self.last_save_seconds: float | None = None
        #: seconds of the last save's steps: ``write`` (the local write), ``copies`` (sending and receiving),
        #: ``verify`` (the copies' hashes), ``commit`` (the gang marker)
        self.last_save_phases: dict[str, float] = {}
        self._last_save: tuple[int, float] | None = None
        self._saves = 0
        if tier is None:
            self.plain: CheckpointManager | None = CheckpointManager(
                url, rank=rank, world_size=world_size, session=session, save_policy=save_policy,
                agreement=agreement, **store_kwargs,
            )  # fmt: skip
            return
        self.plain = None
        self.link: Link = link or (GroupLink() if world_size > 1 else SoloLink())
        mine = {"session": session or secrets.token_hex(6), "zone": tier.zone, "dir": str(tier.path)}
        everyone = self.link.all_gather(mine)
        self.session = layout.check_session(everyone[0]["session"])  # rank 0's token: one generation name for all
        self.zones: list[str] = [str(g["zone"]) for g in everyone]
        self.dirs: list[str] = [str(g["dir"]) for g in everyone]
        self.partners = partners(self.zones, tier.peer_copies)
        self.node = NodeTier(tier.path, url, tier.keep)
        self.uploader = Uploader(self.node, self._store)

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
        """Commit ``step`` to the local tiers of the gang (see the module docstring); every rank calls it."""
        if self.plain is not None:
            return self.plain.save(step, state)
        started = time.monotonic()
        info, _ = self._save_local(step, state)
        self._saves += 1
        assert self.tier is not None
        if self._saves % self.tier.durable_every == 0:
            self.uploader.submit(step, info.generation, self.rank)
        self.node.prune(self.session)
        self.last_save_seconds = time.monotonic() - started
        self._last_save = (step, time.monotonic())
        return info

    def save_async(self, step: int, state: Mapping[str, Any]) -> SaveHandle:
        """As :meth:`save` (the local write and the copies are fast; the upload is in the background);
        the handle is done when it returns."""
        handle = SaveHandle(step)
        try:
            info = self.save(step, state)
        except BaseException as err:
            handle._finish(None, err)
        else:
            handle._finish(info, None)
        return handle

    def wait_pending(self, timeout: float | None = None) -> None:
        if self.plain is not None:
            self.plain.wait_pending(timeout)

    def _save_local(self, step: int, state: Mapping[str, Any]) -> tuple[GenerationInfo, GangMarker]:
        generation = layout.generation_name(step, self.session)
        error: str | None = None
        info: GenerationInfo | None = None
        phases = self.last_save_phases = {}
        started = time.monotonic()
        try:
            info = self.node.manager(self.rank, self.session).save(step, state)
        except Exception as err:  # the others must still hear from us
            error = f"{type(err).__name__}: {err}"
        phases["write"] = time.monotonic() - started
        wrote = self.link.all_gather(error is None)
        held = self._copy_to_peers(step, generation, wrote)
        started = time.monotonic()
        outcomes = self.link.all_gather({"error": error, "held": held})
        failed = {r: o["error"] for r, o in enumerate(outcomes) if o["error"]}
        if failed:
            raise CheckpointError(f"local save of step {step} failed on rank(s) {sorted(failed)}: "
                                  + "; ".join(f"rank {r}: {e}" for r, e in sorted(failed.items())))  # fmt: skip
        holders = {shard: sorted(r for r, o in enumerate(outcomes) if o["held"].get(shard)) for shard in range(self.world_size)}
        marker = GangMarker(step, generation, self.world_size, holders, self.zones, self.dirs)
        self.node.write_marker(marker)
        phases["commit"] = time.monotonic() - started
        assert info is not None
        return info, marker

    def _copy_to_peers(self, step: int, generation: str, wrote: list[bool]) -> dict[int, bool]:
        """Send this rank's generation to its partners, receive and verify the ones it holds; which verified."""
        sends: dict[int, tuple[Path, list[Path]]] = {}
        if wrote[self.rank]:
            files = self.node.generation_files(self.rank, step, generation)
            sends = {holder: (self.node.shard_root(self.rank), files) for holder in self.partners[self.rank]}
        owners = [o for o, hs in self.partners.items() if self.rank in hs and wrote[o]]
        staged = {owner: self.node.incoming(generation, owner) for owner in owners}
        started = time.monotonic()
        received = self.link.exchange(sends, staged)
        self.last_save_phases["copies"] = time.monotonic() - started
        started = time.monotonic()
        verified: dict[int, bool] = {}
        for owner, files in received.items():
            report = CheckpointManager(staged[owner].as_uri(), rank=0, world_size=1, session=self.session).verify(step)
            verified[owner] = report.ok and report.generation == generation
            if verified[owner]:
                self.node.accept(staged[owner], owner, files)
            else:
                log.warning("copy of rank %s's step %s failed verification on arrival: %s", owner, step,
                            "; ".join(report.problems))  # fmt: skip
        self.last_save_phases["verify"] = time.monotonic() - started
        return verified

    def save_final(self, step: int, state: Mapping[str, Any], budget_seconds: float) -> FinalSaveResult:
        """The last save before preemption: to the local tier and the peers first, then to the store
        within what is left of ``budget_seconds`` (every rank calls it)."""
        if self.plain is not None:
            return self.plain.save_final(step, state, budget_seconds)
        started = time.monotonic()
        if budget_seconds <= 0:
            return FinalSaveResult(False, 0.0, None, f"no time budget ({budget_seconds}s); nothing written")
        try:
            info, marker = self._save_local(step, state)
        except CheckpointError as err:
            return FinalSaveResult(False, time.monotonic() - started, None, f"failed: {err}")
        local = time.monotonic() - started
        copies = len(marker.holders.get(self.rank, []))
        upload = self.uploader.submit(step, info.generation, self.rank)
        upload.done.wait(max(0.0, budget_seconds - (time.monotonic() - started)))
        elapsed = time.monotonic() - started
        self.last_save_seconds = elapsed
        store = _store_outcome(upload)
        return FinalSaveResult(True, elapsed, info.generation,
                               f"committed to the local tier and {copies} peer cop(ies) in {local:.2f}s; the object "
                               f"store: {store} ({elapsed:.2f}s of {budget_seconds:.1f}s)")  # fmt: skip

    # -- restoring -------------------------------------------------------------------------------
    def restore(self, *, max_step: int | None = None, into: Mapping[str, Any] | None = None) -> RestoreResult | None:
        """This rank's state of the newest step every rank can get, from the nearest verified copy (collective)."""
        if self.plain is not None:
            return self.plain.restore(max_step=max_step, into=into)
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

    def close(self, timeout: float | None = None) -> None:
        """Let queued uploads finish (up to ``timeout``)."""
        if self.plain is None:
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
