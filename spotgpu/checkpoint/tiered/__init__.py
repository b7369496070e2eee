"""Checkpoint tiers: a node-local copy and peer copies in front of the object store (issue 33).

:class:`TieredCheckpointManager` takes the calls of :class:`~spotgpu.checkpoint.CheckpointManager`
(save, save_final, restore, should_save) and, with a :class:`LocalTier`, commits every save to the
node's local tier and its peers first, uploads every ``durable_every``-th to the store in the
background, and restores each rank from the nearest verified copy. See docs/checkpoints.md.
"""

from spotgpu.checkpoint.tiered.config import LocalTier
from spotgpu.checkpoint.tiered.manager import TieredCheckpointManager

__all__ = ["LocalTier", "TieredCheckpointManager"]
