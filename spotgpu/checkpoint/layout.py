"""Where everything lives in a checkpoint store (pure naming; no I/O).

Format 2 (written since issue 32), one data object per rank per generation::

    ROOT/shards/<hh>/<step:012d>-<session>/r<rank:05d>-<k:03d>.shard    the rank's values, packed (k = 0 unless split)
    ROOT/shards/<hh>/<step:012d>-<session>/part-r<rank:05d>.json        the rank's part: the index of its shard
    ROOT/shards/<hh>/<step:012d>-<session>/_writing-r<rank:05d>.json    the rank's lease while it writes
    ROOT/shards/<hh0>/<step:012d>-<session>/dcp.metadata                 objects the coordinator writes (under rank 0's <hh>)
    ROOT/commits/<step:012d>.json                                        commit marker (create-only)
    ROOT/failed/<step:012d>.json                                         verdict: that step's generation failed

``<hh>`` is :func:`rank_bucket`: two hex digits of a hash of the rank, *before* the
generation. Why: S3 serves about 3,500 writes and 5,500 reads per second *per partitioned
prefix* and answers ``503 SlowDown`` beyond, and it splits a hot prefix into partitions only
after minutes of load; GCS and Azure also spread load by key range. A checkpoint is a burst
in which every rank writes at once, and every generation is a *new* name. With the generation
first (format 1: ``generations/<gen>/r<rank>/...``) every rank of a burst shares one fresh,
unsplit prefix, so a 1,024-rank save queues behind one partition's rate. With a hash of the
rank first, the ranks of one save fall into 256 prefixes that are the *same* for every
generation, so the partitions the store has learned for ``shards/3f/`` serve the next save
too. The hash depends on the rank only (not the generation), so one rank's objects of every
generation sit together and a rank's part is found without a listing.

Format 1 (``generations/<step>-<session>/r<rank>/<index>-<key>``, one object per value,
``part-r<rank>.json`` next to them) is still read: the commit marker says which format its
generation has, and every function here that parses a path knows both.

A generation's name includes a per-run session token, so a restarted or zombie writer never
writes into another attempt's objects. The commit marker is keyed by step alone and written
create-only, so exactly one attempt wins each step.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from spotgpu.storage.local_store import TMP_PREFIX  # local stores write every object to a hidden temporary first

#: The area of format-1 generations (read only).
GENERATIONS = "generations"
#: The area of format-2 generations.
SHARDS = "shards"
COMMITS = "commits"
FAILED = "failed"
#: Every area that holds generation objects, oldest format first.
OBJECT_AREAS = (GENERATIONS, SHARDS)
GENERATION_PATTERN = r"^(\d{12})-([a-z0-9]{1,32})$"
_GEN_RE = re.compile(GENERATION_PATTERN)
_COMMIT_RE = re.compile(r"^commits/(\d{12})\.json$")
_FAILED_RE = re.compile(r"^failed/(\d{12})\.json$")
_SESSION_RE = re.compile(r"^[a-z0-9]{1,32}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_BUCKET_RE = re.compile(r"^[0-9a-f]{2}$")
_LEASE_RE = re.compile(r"^(?:generations/[^/]+|shards/[0-9a-f]{2}/[^/]+)/_writing-r(\d{5})\.json$")
MAX_STEP = 10**12 - 1
#: A writer's lease counts as alive for this long after its last refresh (store clock).
#: A protocol constant, not a setting: every writer and every GC must agree on it.
LEASE_TTL_SECONDS = 30.0
#: How often a writer refreshes its lease: six refreshes per TTL ride out slow PUTs.
LEASE_REFRESH_SECONDS = LEASE_TTL_SECONDS / 6


@dataclass(frozen=True, order=True)
class GenerationName:
    step: int
    session: str

    def __str__(self) -> str:
        return f"{self.step:012d}-{self.session}"


def check_step(step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        raise ValueError(f"step: {step!r} is not an integer in [0, {MAX_STEP}]; fix: pass the training step number")
    return step


def check_session(session: str) -> str:
    if not _SESSION_RE.match(session):
        raise ValueError(f"session: {session!r} must be 1-32 lowercase letters/digits; fix: e.g. a hex token")
    return session


def generation_name(step: int, session: str) -> str:
    return str(GenerationName(check_step(step), check_session(session)))


def parse_generation(name: str) -> GenerationName | None:
    m = _GEN_RE.match(name)
    return GenerationName(int(m.group(1)), m.group(2)) if m else None


def rank_bucket(rank: int) -> str:
    """Two hex digits spreading ranks over 256 key prefixes (see the module docstring)."""
    return hashlib.blake2b(rank.to_bytes(4, "big"), digest_size=1).hexdigest()


def rank_prefix(generation: str, rank: int) -> str:
    """Where one rank's objects of ``generation`` live (format 2)."""
    return f"{SHARDS}/{rank_bucket(rank)}/{generation}/"


def shard_path(generation: str, rank: int, index: int = 0) -> str:
    """The ``index``-th data object of ``rank`` (one per rank unless its state passed the split size)."""
    return f"{rank_prefix(generation, rank)}r{rank:05d}-{index:03d}.shard"


def part_path(generation: str, rank: int) -> str:
    return f"{rank_prefix(generation, rank)}part-r{rank:05d}.json"


def lease_path(generation: str, rank: int) -> str:
    return f"{rank_prefix(generation, rank)}_writing-r{rank:05d}.json"


def coordinator_path(generation: str, name: str) -> str:
    """An object the coordinator writes for the whole generation (e.g. DCP's metadata)."""
    return f"{rank_prefix(generation, 0)}{name}"


def generation_of(path: str) -> str | None:
    """The generation a store path belongs to (either format), or None."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == GENERATIONS:
        return parts[1]
    if len(parts) >= 4 and parts[0] == SHARDS and _BUCKET_RE.match(parts[1]):
        return parts[2]
    return None


def belongs_to(path: str, generation: str) -> bool:
    return generation_of(path) == generation


def is_lease_path(path: str) -> bool:
    return _LEASE_RE.match(path) is not None


def shows_a_live_writer(path: str) -> bool:
    """A lease, or a temporary still being written (on a local store the lease's own
    temporary is visible before the lease is): younger than the TTL, either one means
    a writer is at work in that generation."""
    return is_lease_path(path) or path.rsplit("/", 1)[-1].startswith(TMP_PREFIX)


def legacy_object_path(generation: str, rank: int, index: int, key: str) -> str:
    """Format 1: one object per value (kept to describe, and test against, old stores)."""
    readable = _UNSAFE.sub("_", key)[:80] or "obj"
    return f"{GENERATIONS}/{generation}/r{rank:05d}/{index:05d}-{readable}"


def commit_path(step: int) -> str:
    return f"{COMMITS}/{check_step(step):012d}.json"


def parse_commit_path(path: str) -> int | None:
    m = _COMMIT_RE.match(path)
    return int(m.group(1)) if m else None


def failed_path(step: int) -> str:
    return f"{FAILED}/{check_step(step):012d}.json"


def parse_failed_path(path: str) -> int | None:
    m = _FAILED_RE.match(path)
    return int(m.group(1)) if m else None
