"""Garbage-collection planning: a pure function from what is in the store to what to delete.

Rules, in order:
- committed generations known to have failed verification are retired first (they do
  not count against the retention policy), and their ``failed/`` verdicts go with them;
- the newest *verified* generation is never deleted, whatever the retention policy says;
- committed generations the retention policy keeps stay; the others are retired by
  deleting the commit marker first, then the objects (a crash in between leaves
  uncommitted debris, which a later GC removes);
- objects of generations without a commit marker (failed, cancelled or lost-the-race
  saves) and stray temporaries are deleted once older than the grace period, unless a
  save in this process is still writing them;
- whatever the grace period, a generation without a commit marker whose writer's lease
  (``_writing-r<rank>.json``) was refreshed less than ``LEASE_TTL_SECONDS`` ago belongs
  to a save in progress somewhere and is never deleted;
- a commit verdict (``failed/<step>.json`` of a step with no marker) stays one lease TTL,
  so the ranks still polling for that save see it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from spotgpu.checkpoint import layout
from spotgpu.checkpoint.policies import DebrisPolicy, RetentionPolicy
from spotgpu.storage.store import ObjectInfo


@dataclass(frozen=True)
class StoreSnapshot:
    """What a listing shows: committed step -> generation, and every object's info."""

    commits: Mapping[int, str | None]
    objects: tuple[ObjectInfo, ...]


@dataclass
class GcPlan:
    retire_steps: list[int] = field(default_factory=list)
    delete_paths: list[str] = field(default_factory=list)
    kept_steps: list[int] = field(default_factory=list)
    debris_generations: list[str] = field(default_factory=list)
    young_debris_generations: list[str] = field(default_factory=list)
    #: Uncommitted generations whose writer holds a live lease (a save in progress).
    live_generations: list[str] = field(default_factory=list)
    #: Committed steps retired because they failed verification (listed first in retire_steps).
    failed_steps: list[int] = field(default_factory=list)


def plan_gc(
    snapshot: StoreSnapshot,
    *,
    retention: RetentionPolicy,
    debris: DebrisPolicy,
    newest_verified_step: int | None,
    now: dt.datetime,
    in_flight: Iterable[str] = (),
    lease_ttl_seconds: float = layout.LEASE_TTL_SECONDS,
    failed_steps: Iterable[int] = (),
) -> GcPlan:
    plan = GcPlan()
    steps = sorted(snapshot.commits, reverse=True)
    failed = {s for s in failed_steps if s in snapshot.commits and s != newest_verified_step}
    healthy = [s for s in steps if s not in failed]
    kept = retention.keep(healthy)
    if newest_verified_step is not None:
        kept.add(newest_verified_step)
    plan.failed_steps = sorted(failed, reverse=True)
    plan.kept_steps = [s for s in steps if s in kept]
    plan.retire_steps = plan.failed_steps + [s for s in healthy if s not in kept]
    live = {g for s in plan.kept_steps if (g := snapshot.commits[s])}
    retired = {g for s in plan.retire_steps if (g := snapshot.commits[s])}
    busy = set(in_flight)

    newest: dict[str, dt.datetime] = {}
    paths: dict[str, list[str]] = {}
    leased: set[str] = set()
    loose: list[ObjectInfo] = []
    verdicts: list[str] = []
    for info in snapshot.objects:
        gen = layout.generation_of(info.path)
        verdict_step = layout.parse_failed_path(info.path)
        if verdict_step is not None:
            # A committed step's verdict goes with this plan (its step is retired, or the
            # verdict is stale). One for a step with no marker is a save's commit verdict
            # (or stale): kept while ranks may still be polling for it, one lease TTL.
            young = (now - info.last_modified).total_seconds() < lease_ttl_seconds
            if verdict_step in snapshot.commits or not young:
                verdicts.append(info.path)
            continue
        if gen is None:
            if layout.parse_commit_path(info.path) is None:
                loose.append(info)  # e.g. a temporary left by a crashed commit
            continue
        paths.setdefault(gen, []).append(info.path)
        if layout.shows_a_live_writer(info.path) and (now - info.last_modified).total_seconds() < lease_ttl_seconds:
            leased.add(gen)
        newest[gen] = max(newest.get(gen, info.last_modified), info.last_modified)

    for gen in sorted(paths):
        if gen in live or gen in busy:
            continue
        if gen in retired:
            plan.delete_paths.extend(sorted(paths[gen]))
        elif gen in leased:
            plan.live_generations.append(gen)
        elif debris.expired((now - newest[gen]).total_seconds()):
            plan.debris_generations.append(gen)
            plan.delete_paths.extend(sorted(paths[gen]))
        else:
            plan.young_debris_generations.append(gen)
    for info in loose:
        age = (now - info.last_modified).total_seconds()
        # A marker's temporary younger than the lease TTL is a commit in progress, whatever the grace.
        if info.path.startswith(layout.COMMITS + "/") and age >= lease_ttl_seconds and debris.expired(age):
            plan.delete_paths.append(info.path)
    # Verdicts last: a crash before this leaves a verdict whose step is gone (stale, harmless).
    plan.delete_paths.extend(sorted(verdicts))
    return plan
