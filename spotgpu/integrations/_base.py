"""What both framework callbacks share: the store, the save schedule, the gang, the outcome.

The framework-specific parts (which hook, which checkpoint files, how to resume) live in
:mod:`.hf` and :mod:`.lightning`; everything that decides *when* and *whether* lives here,
so the two behave the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, NoReturn

from spotgpu.agent.client import AgentClient
from spotgpu.checkpoint import CheckpointManager
from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager
from spotgpu.gang import EXIT_GANG_STOP, Gang, exit_now
from spotgpu.integrations._generations import (
    FrameworkCheckpoints,
    RestoredDirectory,
    agreed_max,
    process_group,
    shared_session,
)
from spotgpu.integrations.schedule import SaveSchedule

log = logging.getLogger(__name__)

#: ``tier=`` values besides a :class:`LocalTier`: the VM's tier when it has one, or none (None is "off").
TIER_AUTO, TIER_OFF = "auto", "off"


def resolve_tier(tier: LocalTier | str | None) -> LocalTier | None:
    """The local tier a callback saves through: ``"auto"`` the VM's (:meth:`LocalTier.from_environment`:
    the bootstrap's ``localTier``, ``$SPOTGPU_LOCAL_DIR``), ``"off"`` or None none, a LocalTier itself."""
    if isinstance(tier, LocalTier):
        return tier
    if tier is None or tier == TIER_OFF:
        return None
    if tier == TIER_AUTO:
        return LocalTier.from_environment()
    raise ValueError(f"tier: {tier!r} is not a tier choice; fix: 'auto' (the VM's local tier when it has one), "
                     "'off' or None (every save to the store), or a spotgpu.checkpoint.tiered.LocalTier")  # fmt: skip


class SpotgpuCallbackCore:
    """Periodic saves on a schedule every rank shares, the gang stop, the agreed restore.

    ``url``: the checkpoint store (``s3://``, ``gs://``, ``az://``, ``file://``).
    ``every_seconds``: the workload profile's checkpoint interval
    (``choose_interval(profile, notice).seconds``, the agent's ``checkpointIntervalSeconds``),
    or ``every_steps``. ``agent``: this rank's :class:`AgentClient` (default: the one at
    ``$SPOTGPU_AGENT`` or the standard socket; with no agent running, training just goes on).
    ``gang_every``: steps between the gang's stop checks (``"auto"`` picks them).
    ``tier``: ``"auto"`` (default) saves through the VM's node-local tier and peer copies when it
    has one (a pool with ``checkpointTiers``; the store then gets every ``durable_every``-th save,
    and a restore reads the nearest verified copy), ``"off"`` or None keeps every save in the store,
    a :class:`~spotgpu.checkpoint.tiered.LocalTier` names one. Every rank must resolve it alike.
    With a tier, a periodic save blocks training only for the copy of the framework's files to host
    memory (``TieredCheckpointManager.save_async``); the local write, the peer copies and the upload
    run in the background. An early checkpoint and the gang's final one first let that save finish.
    """

    def __init__(
        self,
        url: str,
        *,
        every_seconds: float | None = None,
        every_steps: int | None = None,
        agent: AgentClient | None = None,
        gang_every: int | str = 1,
        keep: int = 5,
        store_options: Mapping[str, Any] | None = None,
        tier: LocalTier | str | None = TIER_AUTO,
    ) -> None:
        self.url = url
        #: the node-local tier saves go through first (None: every save goes to the store)
        self.tier = resolve_tier(tier)
        self.schedule = SaveSchedule(every_steps=every_steps, every_seconds=every_seconds)
        self._agent = agent
        self._gang_every = gang_every
        self._keep = keep
        self._store_options = dict(store_options or {})
        self.checkpoints: FrameworkCheckpoints | None = None
        self.gang: Gang | None = None
        self.restored: RestoredDirectory | None = None
        self.final_result: Any = None
        self._anchor: tuple[int, float] | None = None

    # -- setup --------------------------------------------------------------------
    def _setup(self) -> FrameworkCheckpoints:
        """Once the job's process group exists (every rank calls it: it may broadcast)."""
        if self.checkpoints is None:
            rank, world = process_group()
            # Every rank takes part (a collective); a rank without a tier (a fallback VM of another type) would
            # skip the tier's collectives and hang the others in them, so then every rank saves to the store.
            every_rank_tiered = world == 1 or -agreed_max(-1.0 if self.tier is not None else 0.0) >= 1.0
            if self.tier is not None and not every_rank_tiered:
                log.warning("rank %d has a local tier (%s) but not every rank does: every rank saves to the store",
                            rank, self.tier.path)  # fmt: skip
                self.tier = None
            manager: CheckpointManager | TieredCheckpointManager
            if self.tier is None:
                manager = CheckpointManager(
                    self.url,
                    keep=self._keep,
                    rank=rank,
                    world_size=world,
                    session=shared_session(world),
                    store_options=self._store_options,
                )
            else:  # makes the tier's two gloo groups and agrees on the session: every rank, here
                manager = TieredCheckpointManager(
                    self.url, self.tier, rank=rank, world_size=world, keep=self._keep, store_options=self._store_options
                )
            self.checkpoints = FrameworkCheckpoints(manager)
            self.gang = Gang(self._agent or AgentClient(), every=self._gang_every)
        return self.checkpoints

    def _restore(self) -> RestoredDirectory | None:
        """Every rank: the same newest generation that verifies everywhere (or None)."""
        checkpoints = self._setup()
        assert self.gang is not None
        self.restored = self.gang.restore(checkpoints)
        return self.restored

    def _start(self, step: int) -> None:
        self._setup()
        self.schedule.start(step)
        self._anchor = (step, time.monotonic())

    # -- per step -----------------------------------------------------------------
    def _decide(self, step: int) -> str | None:
        """``"final"`` (the gang stops here), ``"early"``, ``"periodic"`` or None, alike on every rank."""
        assert self.gang is not None
        if self.gang.should_stop(step):
            return "final"
        if self.gang.checkpoint_requested() == "early":
            self.schedule.saved(step)
            return "early"
        due = self.schedule.due(step)
        if self.schedule.needs_timing(step):
            now = time.monotonic()
            anchor_step, anchor_time = self._anchor or (0, now)
            per_step = (now - anchor_time) / max(1, step - anchor_step)
            self.schedule.replan(step, agreed_max(per_step))
            self._anchor = (step, now)
        elif due:
            self.schedule.replan(step, 0.0)
        return "periodic" if due else None

    def _commit(self, kind: str, step: int, state: Mapping[str, Any]) -> Any:
        """One save of ``kind`` by every rank at ``step``."""
        checkpoints, gang = self.checkpoints, self.gang
        assert checkpoints is not None and gang is not None
        if kind == "final":
            self.final_result = gang.final_checkpoint(checkpoints, step, state)
            return self.final_result
        if kind == "early":  # committed before it is reported (after the save in flight)
            return gang.early_checkpoint(checkpoints, step, state)
        return checkpoints.save_periodic(step, state)  # with a tier: training waits for the host copy only

    # -- the outcome ----------------------------------------------------------------
    @property
    def stopped(self) -> bool:
        return self.gang is not None and self.gang.stop is not None

    @property
    def exit_code(self) -> int:
        """What the job exits with: EXIT_GANG_STOP after a gang stop (the launcher restarts
        it and it resumes), 0 when training ran to its end."""
        return EXIT_GANG_STOP if self.stopped else 0

    def exit(self) -> NoReturn:
        """End the job with :attr:`exit_code` at once (:func:`spotgpu.gang.exit_now`): the
        interpreter's teardown of a distributed job can hang or abort in torch's gloo group
        (``terminate called without an active exception``), which would turn a clean 75 or 0
        into a crash. Call it last, once ``train``/``fit`` has returned. With a local tier, the periodic
        save in flight and the uploads to the store still queued finish first when training ran to its
        end (after a gang stop the final checkpoint already waited for the one and spent the budget on
        its own upload)."""
        self._training_ended()
        exit_now(self.exit_code)

    def _training_ended(self) -> None:
        """Training ran to its end: let the tier's save in flight and its queued uploads finish (a gang stop
        leaves them: its final checkpoint waited for the save, within the budget)."""
        if self.checkpoints is not None and not self.stopped:
            self.checkpoints.close()
