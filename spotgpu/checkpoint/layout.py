"""Where everything lives in a checkpoint store (pure naming; no I/O).

::

    ROOT/generations/<step:012d>-<session>/r<rank:05d>/<index:05d>-<key>   data objects
    ROOT/generations/<step:012d>-<session>/part-r<rank:05d>.json           one rank's manifest part
    ROOT/generations/<step:012d>-<session>/_writing-r<rank:05d>.json       a live writer's lease
    ROOT/commits/<step:012d>.json                                          commit marker (create-only)
    ROOT/failed/<step:012d>.json                                           verdict: that step's generation failed verification

A generation's prefix includes a per-run session token, so a restarted or zombie
writer never writes into another attempt's objects. The commit marker is keyed by step
alone and written create-only, so exactly one attempt wins each step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spotgpu.storage.local_store import TMP_PREFIX  # local stores write every object to a hidden temporary first

GENERATIONS = "generations"
COMMITS = "commits"
FAILED = "failed"
GENERATION_PATTERN = r"^(\d{12})-([a-z0-9]{1,32})$"
_GEN_RE = re.compile(GENERATION_PATTERN)
_COMMIT_RE = re.compile(r"^commits/(\d{12})\.json$")
_FAILED_RE = re.compile(r"^failed/(\d{12})\.json$")
_SESSION_RE = re.compile(r"^[a-z0-9]{1,32}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_LEASE_RE = re.compile(r"^generations/[^/]+/_writing-r(\d{5})\.json$")
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


def generation_prefix(generation: str) -> str:
    return f"{GENERATIONS}/{generation}/"


def generation_of(path: str) -> str | None:
    """The generation a store path belongs to, or None if it is not under generations/."""
    parts = path.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == GENERATIONS else None


def part_path(generation: str, rank: int) -> str:
    return f"{GENERATIONS}/{generation}/part-r{rank:05d}.json"


def lease_path(generation: str, rank: int) -> str:
    return f"{GENERATIONS}/{generation}/_writing-r{rank:05d}.json"


def is_lease_path(path: str) -> bool:
    return _LEASE_RE.match(path) is not None


def shows_a_live_writer(path: str) -> bool:
    """A lease, or a temporary still being written (on a local store the lease's own
    temporary is visible before the lease is): younger than the TTL, either one means
    a writer is at work in that generation."""
    return is_lease_path(path) or path.rsplit("/", 1)[-1].startswith(TMP_PREFIX)


def object_path(generation: str, rank: int, index: int, key: str) -> str:
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
