"""Checkpoint tiers: a node-local copy and peer copies in front of the object store.

``workloads.X.checkpointTiers`` turns them on. Every periodic save then commits to the
node's local tier first (the instance's NVMe, or a RAM disk where the type has none: the
pool mounts it at ``local.path``), with ``peerCopies`` copies of each node's shard on other
nodes' local tiers, and is uploaded to the object store in the background every
``durableIntervalSeconds``. The local interval is the workload's
``checkpointIntervalSeconds``; both are chosen by ``spotgpu.economics.tiers`` when ``auto``.

The write and load figures are measured (``spotgpu drill local`` reports each rank's
restore source and seconds, the checkpoint library each save's blocking seconds); until
they are, a *prior* from the node's share of ``checkpointBytes`` at the bandwidths below is
used, and the preview says so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from spotgpu.models.base import SpotModel, fix_hint

if TYPE_CHECKING:
    from spotgpu.catalogue import LocalStorage

#: Where the pool mounts the tier on every VM (and the job finds it, ``SPOTGPU_LOCAL_DIR``).
DEFAULT_LOCAL_PATH = "/var/lib/spotgpu/local"
#: Prior bandwidths until the figures are measured: one NVMe disk's sequential write with
#: fsync (a RAM disk is faster), its read, and one network flow to a peer (AWS limits a
#: single flow to 5 Gb/s outside a placement group; /work/shared/facts/storage.md).
PRIOR_LOCAL_WRITE_BYTES_PER_SECOND = 2.0e9
PRIOR_LOCAL_READ_BYTES_PER_SECOND = 3.0e9
PRIOR_PEER_BYTES_PER_SECOND = 0.625e9
#: A RAM disk may take at most this share of a type's host memory (the job needs the rest:
#: its data loader, pinned buffers, and the host snapshot of an async save).
RAM_DISK_MAX_SHARE = 0.5

_PATH = r"^/(?:[A-Za-z0-9._-]+/)*[A-Za-z0-9._-]+$"
#: The smallest per-rank memory budget a workload may set (one 64 MiB chunk of the copy).
MIN_MEMORY_BUDGET_GIB = 1 / 16


class LocalTier(SpotModel):
    """The node-local tier: where it is mounted, how many generations it keeps, what it costs."""

    path: str = Field(
        default=DEFAULT_LOCAL_PATH,
        pattern=_PATH,
        description="Where every VM of the pool mounts its local NVMe (or RAM disk) for checkpoints.",
        json_schema_extra=fix_hint("use an absolute path of letters, digits, '.', '_', '-' and '/', e.g. /var/lib/spotgpu/local"),
    )
    keep: int = Field(
        default=2,
        ge=1,
        le=16,
        description="Committed generations each node keeps in its local tier (its own shard and its peer copies).",
        json_schema_extra=fix_hint("keep 1 to 16 generations, e.g. 2"),
    )
    write_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Measured seconds a periodic save blocks training with the tier on (the write to the local "
        "tier); unset: a prior from the node's share of checkpointBytes.",
        json_schema_extra=fix_hint("set the measured seconds, e.g. 8, or leave it out for the prior"),
    )
    commit_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Measured seconds from a save's start until its local generation is committed with its peer "
        "copies verified (what a final checkpoint needs of the notice); unset: the write plus a prior for the copies.",
        json_schema_extra=fix_hint("set the measured seconds, e.g. 20, or leave it out for the prior"),
    )
    load_seconds: float | None = Field(
        default=None,
        gt=0,
        description="Measured seconds to restore a node's shard from its own tier or a peer's (the slower); "
        "unset: a prior from the node's share of checkpointBytes.",
        json_schema_extra=fix_hint("set the measured seconds, e.g. 6, or leave it out for the prior"),
    )
    memory_budget_gib: float | None = Field(
        default=None,
        ge=MIN_MEMORY_BUDGET_GIB,
        le=16384,
        alias="memoryBudgetGiB",
        description="Host memory each rank's background save may hold for its copy of the state (the checkpoint "
        "library's memory_budget_bytes); a larger state is written partly while training waits. Unset: a whole "
        "copy per rank (on an 8-GPU node, eight shards' worth of RAM).",
        json_schema_extra=fix_hint("set GiB per rank, at least 0.0625 (64 MiB), e.g. 8, or leave it out for no bound"),
    )
    ram_disk_gib: float | None = Field(
        default=None,
        gt=0,
        le=16384,
        alias="ramDiskGiB",
        description="Size of the RAM disk on a type without local NVMe; unset: (keep + 2) x (1 + peerCopies) "
        "x the node's share of checkpointBytes (the kept generations, the one being written and the newest "
        "durable one, which the tier keeps too).",
        json_schema_extra=fix_hint("set GiB, e.g. 64, or leave it out to size it from the workload"),
    )


class CheckpointTiers(SpotModel):
    """``checkpointTiers``: a local tier, peer copies, and how often the object store gets a copy."""

    local: LocalTier = LocalTier()
    peer_copies: int = Field(
        default=1,
        ge=0,
        le=3,
        description="Other nodes that hold a verified copy of each node's shard (across zones when the pool spans "
        "zones); a single-node job has none, whatever this says.",
        json_schema_extra=fix_hint("use 0 to 3, e.g. 1"),
    )
    durable_interval_seconds: int | Literal["auto"] = Field(
        default="auto",
        description="How often a local generation is uploaded to the object store (rounded up to a whole number "
        "of local intervals), or auto to derive it from the store's write cost and the chance a restore needs it.",
        json_schema_extra=fix_hint("use a positive number of seconds or the string auto"),
    )

    def peers(self, nodes: int) -> int:
        """The peer copies a gang of ``nodes`` can hold (no more than the other nodes)."""
        return max(0, min(self.peer_copies, nodes - 1))


def node_bytes(checkpoint_bytes: int, nodes: int) -> float:
    """One node's share of the whole checkpoint."""
    return checkpoint_bytes / max(1, nodes)


def ram_disk_gib(tiers: CheckpointTiers, checkpoint_bytes: int, nodes: int) -> int:
    """The RAM disk a node needs: ``keep`` committed generations, one being written and the newest
    durable one, of its own shard and the copies it holds for its peers (whole GiB, at least 1)."""
    if tiers.local.ram_disk_gib is not None:
        return max(1, math.ceil(tiers.local.ram_disk_gib))
    copies = 1 + tiers.peers(nodes)
    return max(1, math.ceil((tiers.local.keep + 2) * copies * node_bytes(checkpoint_bytes, nodes) / 2**30))


def memory_budget_bytes(tiers: CheckpointTiers) -> int | None:
    """``local.memoryBudgetGiB`` in bytes, as the agent config carries it to the checkpoint library (None: unset)."""
    gib = tiers.local.memory_budget_gib
    return None if gib is None else int(gib * 2**30)


def tier_write_seconds(tiers: CheckpointTiers, checkpoint_bytes: int, nodes: int) -> tuple[float, str]:
    """(seconds a periodic save blocks training with the tier on, where the figure comes from)."""
    if tiers.local.write_seconds is not None:
        return tiers.local.write_seconds, "measured (checkpointTiers.local.writeSeconds)"
    b = node_bytes(checkpoint_bytes, nodes)
    return b / PRIOR_LOCAL_WRITE_BYTES_PER_SECOND, (
        f"prior: the node's {b / 1e9:.3g} GB at {PRIOR_LOCAL_WRITE_BYTES_PER_SECOND / 1e9:g} GB/s")


def tier_commit_seconds(tiers: CheckpointTiers, checkpoint_bytes: int, nodes: int) -> tuple[float, str]:
    """(seconds from a save's start to its local commit with verified peer copies, where the figure comes from)."""
    if tiers.local.commit_seconds is not None:
        return tiers.local.commit_seconds, "measured (checkpointTiers.local.commitSeconds)"
    write, _ = tier_write_seconds(tiers, checkpoint_bytes, nodes)
    b, peers = node_bytes(checkpoint_bytes, nodes), tiers.peers(nodes)
    return write + peers * b / PRIOR_PEER_BYTES_PER_SECOND, (
        f"the write + prior: {peers} peer cop(ies) of {b / 1e9:.3g} GB at {PRIOR_PEER_BYTES_PER_SECOND / 1e9:g} GB/s")


def tier_load_seconds(tiers: CheckpointTiers, checkpoint_bytes: int, nodes: int) -> tuple[float, str]:
    """(seconds to restore a node's shard from the local tier or a peer, where the figure comes from)."""
    if tiers.local.load_seconds is not None:
        return tiers.local.load_seconds, "measured (checkpointTiers.local.loadSeconds)"
    b = node_bytes(checkpoint_bytes, nodes)
    rate = PRIOR_PEER_BYTES_PER_SECOND if tiers.peers(nodes) else PRIOR_LOCAL_READ_BYTES_PER_SECOND
    return b / rate, f"prior: the node's {b / 1e9:.3g} GB at {rate / 1e9:g} GB/s (the slower of local and peer)"


def tier_medium(storage: LocalStorage | None, ram_gib: float) -> tuple[str | None, str]:
    """Which medium a type gives the local tier: ``nvme``, ``ramdisk``, or None (neither: the
    type has no local NVMe and a ``ram_gib`` RAM disk would take more than
    :data:`RAM_DISK_MAX_SHARE` of its memory), with the reason in words."""
    if storage is None:
        return None, "the catalogue does not know the type"
    if storage.has_nvme:
        return "nvme", storage.describe()
    if storage.host_memory_gib is None:
        return None, "no local NVMe, and the catalogue does not record its host memory"
    room = storage.host_memory_gib * RAM_DISK_MAX_SHARE
    if ram_gib <= room:
        return "ramdisk", f"no local NVMe: a {ram_gib:g} GiB RAM disk of its {storage.host_memory_gib:g} GiB memory"
    return None, (f"no local NVMe, and a {ram_gib:g} GiB RAM disk is more than {RAM_DISK_MAX_SHARE:.0%} of its "
                  f"{storage.host_memory_gib:g} GiB memory")  # fmt: skip


#: The job's environment names the mounted tier here (the gang unit, ``spotgpu drill local``).
LOCAL_DIR_ENV = "SPOTGPU_LOCAL_DIR"
#: ... and this VM's zone (``spotgpu gang run`` asks its agent), so peer copies go to other zones.
ZONE_ENV = "SPOTGPU_ZONE"


class LocalTierConfig(SpotModel):
    """What a pool's VMs know of a tiered workload (``localTier`` in /etc/spotgpu/agent.json): where the
    boot script mounted the tier, what it keeps, and the two intervals the checkpoint library follows."""

    path: str = Field(pattern=_PATH, json_schema_extra=fix_hint("an absolute path, e.g. /var/lib/spotgpu/local"))
    keep: int = Field(ge=1, le=16)
    peer_copies: int = Field(ge=0, le=3)
    durable_interval_seconds: int = Field(gt=0, description="Seconds between uploads to the object store.")
    ram_disk_gib: int = Field(ge=1, alias="ramDiskGiB", description="The RAM disk's size where the type has no NVMe.")
    memory_budget_bytes: int | None = Field(
        default=None,
        ge=1 << 20,
        description="Host memory each rank's background save may hold for its copy of the state; None: no bound.",
        json_schema_extra=fix_hint("set bytes per rank, at least 1048576, e.g. 8589934592, or leave it out"),
    )
