"""One node's local tier on disk: a committed single-rank checkpoint per shard it holds, and gang markers.

::

    <tier>/<job>/r<shard:05d>/...           the shard saved by rank <shard>: a world-size-1 checkpoint root
                                            (the store layout, commit markers and hashes of CheckpointManager)
    <tier>/<job>/gang/<step>-<session>.json  the gang committed this generation to its local tiers: every rank's
                                            own shard, and which ranks hold verified copies of each
    <tier>/<job>/durable/<step>-<session>.json  this node saw that generation committed in the object store
    <tier>/<job>/incoming/<generation>-r<shard>/  a copy being received (verified before it moves in)

``<job>`` is a hash of the job's store URL, so jobs sharing a node never mix. A shard root holds the
node's own shard and the copies it keeps for its peers alike; which is which changes when ranks
do. Every read goes through :class:`~spotgpu.checkpoint.CheckpointManager`, so a local copy has
the guarantees of a store generation: committed only with its marker, every byte hashed on read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.manager import CheckpointManager
from spotgpu.checkpoint.tiered.arrival import SHARD_SUFFIX
from spotgpu.checkpoint.tiered.plan import Held
from spotgpu.storage.local_store import TMP_PREFIX, _fsync_dir

#: Debris in a local root (a save cut short) is removed after this long: no other writer shares the node's tier.
LOCAL_GRACE_SECONDS = 60.0


def job_key(url: str) -> str:
    """The job's directory name in a node's tier: a short hash of its store URL."""
    return hashlib.sha256(url.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class GangMarker:
    """What every node of the gang writes once a generation is committed to the local tiers."""

    step: int
    generation: str
    world_size: int
    #: shard -> the ranks holding a verified copy of it (its own rank is not listed)
    holders: dict[int, list[int]]
    #: rank -> its zone and its node's tier directory (what a drill maps ranks to nodes with)
    zones: list[str]
    dirs: list[str]

    def to_json(self) -> str:
        return json.dumps({"step": self.step, "generation": self.generation, "worldSize": self.world_size,
                           "holders": {str(k): v for k, v in self.holders.items()}, "zones": self.zones,
                           "dirs": self.dirs}, sort_keys=True)  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> GangMarker:
        doc = json.loads(text)
        return cls(int(doc["step"]), str(doc["generation"]), int(doc["worldSize"]),
                   {int(k): [int(r) for r in v] for k, v in doc["holders"].items()}, list(doc["zones"]),
                   list(doc["dirs"]))  # fmt: skip


class _Kept:
    """The retention policy of every shard root: the steps the node's tier keeps (:meth:`NodeTier.kept`)."""

    def __init__(self, tier: NodeTier) -> None:
        self.tier = tier

    def keep(self, committed_steps: Sequence[int]) -> set[int]:
        kept = self.tier.kept()
        return {s for s in committed_steps if s in kept}


class NodeTier:
    """This node's part of the local tier for one job."""

    def __init__(self, base: Path, url: str, keep: int) -> None:
        self.base = Path(base)
        self.root = self.base / job_key(url)
        self.keep = keep
        #: steps that must stay whatever the retention says (an upload or a restore reading them)
        self.pinned: set[int] = set()
        for name in ("gang", "durable", "incoming"):
            (self.root / name).mkdir(parents=True, exist_ok=True)

    # -- shard roots -----------------------------------------------------------------
    def shard_root(self, shard: int) -> Path:
        return self.root / f"r{shard:05d}"

    def manager(self, shard: int, session: str, memory_budget_bytes: int | None = None) -> CheckpointManager:
        """The world-size-1 checkpoint of ``shard`` in this node's tier (created on first use); its
        ``save_async`` copies the state through ``memory_budget_bytes`` of host memory."""
        root = self.shard_root(shard)
        root.mkdir(parents=True, exist_ok=True)
        return CheckpointManager(root.as_uri(), rank=0, world_size=1, session=session, retention=_Kept(self),
                                 grace_seconds=LOCAL_GRACE_SECONDS, memory_budget_bytes=memory_budget_bytes)  # fmt: skip

    def shards(self) -> list[int]:
        return sorted(int(p.name[1:]) for p in self.root.glob("r[0-9][0-9][0-9][0-9][0-9]") if p.is_dir())

    def generation_files(self, shard: int, step: int, generation: str) -> list[Path]:
        """Every file of ``generation`` in the shard's root (paths relative to the root): its documents first, then
        its shard data, its commit marker last (a peer checks each shard as it arrives against the part that came
        before it: :mod:`.arrival`)."""
        root = self.shard_root(shard)
        files = []
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not path.name.startswith(TMP_PREFIX) and layout.generation_of(rel) == generation:
                files.append(Path(rel))
        files.sort(key=lambda f: (f.suffix == SHARD_SUFFIX, f.as_posix()))
        marker = Path(layout.commit_path(step))
        if (root / marker).is_file():
            files.append(marker)
        return files

    def committed(self, shard: int, step: int) -> str | None:
        """The generation the shard's root committed for ``step`` (its marker names it), or None (also when a
        read found it bad: its failed verdict is there)."""
        if (self.shard_root(shard) / layout.failed_path(step)).exists():
            return None
        return self._named(shard, step)

    def _named(self, shard: int, step: int) -> str | None:
        """The generation the shard root's commit marker of ``step`` names, whatever became of it."""
        try:
            doc = json.loads((self.shard_root(shard) / layout.commit_path(step)).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        generation = doc.get("generation") if isinstance(doc, dict) else None
        return generation if isinstance(generation, str) else None

    # -- gang markers ------------------------------------------------------------------
    def write_marker(self, marker: GangMarker) -> None:
        _atomic_write(self.root / "gang" / f"{marker.generation}.json", marker.to_json())

    def markers(self) -> list[GangMarker]:
        """The gang-committed generations this node knows, newest first (unreadable ones skipped)."""
        found = []
        for path in _json_files(self.root / "gang"):
            try:
                found.append(GangMarker.from_json(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return sorted(found, key=lambda m: (m.step, m.generation), reverse=True)

    def mark_durable(self, step: int, generation: str) -> None:
        _atomic_write(self.root / "durable" / f"{generation}.json", json.dumps({"step": step, "generation": generation}))

    def durable_steps(self) -> list[int]:
        return sorted((int(p.name.split("-", 1)[0]) for p in _json_files(self.root / "durable")), reverse=True)

    def inventory(self, world_size: int) -> list[Held]:
        """The copies this node holds of gang-committed generations of this world size."""
        held = []
        for marker in self.markers():
            if marker.world_size != world_size:
                continue
            for shard in self.shards():
                if self.committed(shard, marker.step) == marker.generation:
                    held.append(Held(marker.step, marker.generation, shard))
        return held

    # -- retention -----------------------------------------------------------------------
    def kept(self) -> set[int]:
        """The newest ``keep`` gang-committed steps, the newest durable one (so survivors read a fall-back
        to the store's step locally), and the pinned ones."""
        steps = sorted({m.step for m in self.markers()}, reverse=True)[: self.keep]
        durable = self.durable_steps()[:1]
        return {*steps, *durable, *self.pinned}

    def prune(self, session: str) -> None:
        """Drop what the tier no longer keeps: gang markers, and every shard root's generations of other steps
        and its debris (a save or a copy cut short). Deleted directly, marker first: a store's GC would read
        every byte of each root's newest generation to verify it first, at every save."""
        kept = self.kept()
        for marker in self.markers():
            if marker.step not in kept:
                (self.root / "gang" / f"{marker.generation}.json").unlink(missing_ok=True)
        for path in _json_files(self.root / "durable"):
            if int(path.name.split("-", 1)[0]) not in kept:
                path.unlink(missing_ok=True)
        for shard in self.shards():
            self._prune_root(shard, lambda step: step not in kept)

    def _prune_root(self, shard: int, drop: Callable[[int], bool]) -> None:
        """Delete the shard root's committed generations of the steps ``drop`` names (marker first, so a crash
        leaves uncommitted debris), then debris older than :data:`LOCAL_GRACE_SECONDS`."""
        root = self.shard_root(shard)
        committed: set[str] = set()
        for commit in sorted((root / layout.COMMITS).glob("*.json")):
            step = layout.parse_commit_path(f"{layout.COMMITS}/{commit.name}")
            generation = None if step is None else self._named(shard, step)
            if step is None or generation is None:
                continue
            if not drop(step):
                committed.add(generation)
                continue
            files = self.generation_files(shard, step, generation)
            for rel in [files[-1], *files[:-1]]:
                (root / rel).unlink(missing_ok=True)
            (root / layout.failed_path(step)).unlink(missing_ok=True)
        now = time.time()
        for path in root.rglob("*"):
            if not path.is_file() or (path.name.endswith(".json") and path.parent.name in ("commits", "failed")):
                continue
            owner = layout.generation_of(path.relative_to(root).as_posix())
            if owner is not None and owner in committed:
                continue
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > LOCAL_GRACE_SECONDS:
                    path.unlink()

    def drop_newer(self, step: int, session: str) -> None:
        """After the gang restored ``step``: generations past it belong to a timeline that was abandoned
        (the new one will save those steps again). Deleted outright, not by GC, which always keeps a
        root's newest verified generation; each one's commit marker goes first."""
        for marker in self.markers():
            if marker.step > step:
                (self.root / "gang" / f"{marker.generation}.json").unlink(missing_ok=True)
        for path in _json_files(self.root / "durable"):
            if int(path.name.split("-", 1)[0]) > step:
                path.unlink(missing_ok=True)
        for shard in self.shards():
            self._prune_root(shard, lambda s: s > step)
        self.prune(session)

    # -- copies arriving ------------------------------------------------------------------
    def incoming(self, generation: str, shard: int) -> Path:
        where = self.root / "incoming" / f"{generation}-r{shard:05d}"
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        return where

    def accept(self, staged: Path, shard: int, files: Sequence[Path]) -> None:
        """Move a verified copy from its staging directory into the shard's root, its marker last."""
        root = self.shard_root(shard)
        for rel in files:
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged / rel, target)
        _fsync_dir(root)
        shutil.rmtree(staged, ignore_errors=True)

    def discard(self, staged: Path) -> None:
        """Remove a copy that failed its checks."""
        shutil.rmtree(staged, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        return {"root": str(self.root), "shards": self.shards(), "gang": [m.generation for m in self.markers()]}


def _json_files(folder: Path) -> list[Path]:
    """The markers in ``folder`` (a temporary being written is not one yet)."""
    return [p for p in folder.glob("*.json") if not p.name.startswith(TMP_PREFIX)]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)

