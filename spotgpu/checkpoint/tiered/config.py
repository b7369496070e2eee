"""Where a node's local tier is and what it keeps: :class:`LocalTier`, read from the pool's VM.

On a pool VM the bootstrap mounts the tier and writes ``localTier`` into the agent config
(``spotgpu.models.tiers.LocalTierConfig``: path, keep, peer copies, durable interval); the
gang unit exports ``SPOTGPU_LOCAL_DIR`` and ``spotgpu gang run`` ``SPOTGPU_ZONE``.
``spotgpu drill local`` exports the same on every simulated VM. :meth:`LocalTier.from_environment`
reads them (the checkpoint library reads the agent config's JSON itself: it never imports the agent).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from spotgpu.checkpoint.snapshot import check_budget
from spotgpu.contract.vm import AGENT_CONFIG_ENV, AGENT_CONFIG_PATH
from spotgpu.models.tiers import LOCAL_DIR_ENV, ZONE_ENV, LocalTierConfig


@dataclass(frozen=True)
class LocalTier:
    """A node's local checkpoint tier.

    ``durable_every``: every how many local saves the object store gets one (the durable interval
    over the local one). ``zone``: this node's zone; peer copies go to nodes of other zones first.
    ``memory_budget_bytes``: the most host memory one rank's background save holds for its copy of
    the state (``TieredCheckpointManager``'s docstring); None: a whole copy.
    """

    path: Path
    keep: int = 2
    peer_copies: int = 1
    durable_every: int = 1
    zone: str = ""
    memory_budget_bytes: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.keep <= 16:
            raise ValueError(f"keep: {self.keep} must be 1..16; fix: e.g. 2")
        if not 0 <= self.peer_copies <= 3:
            raise ValueError(f"peer_copies: {self.peer_copies} must be 0..3; fix: e.g. 1")
        if self.durable_every < 1:
            raise ValueError(f"durable_every: {self.durable_every} must be >= 1; fix: 1 uploads every save")
        check_budget(self.memory_budget_bytes)

    @classmethod
    def from_environment(cls, agent_config: str | None = None) -> LocalTier | None:
        """The tier this VM mounted, or None when it has none (every save then goes to the store).

        The path is ``$SPOTGPU_LOCAL_DIR``, else the agent config's ``localTier.path``; keep, peer
        copies, the durable interval and the memory budget come from the agent config's ``localTier``
        (defaults without one: keep 2, one peer copy, every save uploaded, no budget); the zone from
        ``$SPOTGPU_ZONE``.
        """
        config = _agent_tier(agent_config)
        where = os.environ.get(LOCAL_DIR_ENV) or (config[0].path if config else None)
        if not where:
            return None
        zone = os.environ.get(ZONE_ENV, "")
        if config is None:
            return cls(Path(where), zone=zone)
        tier, interval = config
        every = max(1, math.ceil(tier.durable_interval_seconds / interval - 1e-9)) if interval else 1
        return cls(Path(where), tier.keep, tier.peer_copies, every, zone, tier.memory_budget_bytes)


def _agent_tier(path: str | None) -> tuple[LocalTierConfig, int] | None:
    """(the agent config's ``localTier``, its ``checkpointIntervalSeconds``), or None without one."""
    where = path or os.environ.get(AGENT_CONFIG_ENV) or AGENT_CONFIG_PATH
    try:
        with open(where, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (OSError, ValueError):
        return None
    block = doc.get("localTier") if isinstance(doc, dict) else None
    if not isinstance(block, dict):
        return None
    interval = doc.get("checkpointIntervalSeconds")
    return LocalTierConfig.model_validate(block), int(interval) if isinstance(interval, int) else 0
