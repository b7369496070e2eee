"""Retention and save policies (pure) and GC against a real store."""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest

from spotgpu.checkpoint import (
    AnyRetention,
    AnySavePolicy,
    CheckpointManager,
    EveryNSeconds,
    EveryNSteps,
    GracePeriod,
    KeepEveryNSteps,
    KeepLast,
    RetentionPolicy,
    SavePolicy,
    layout,
)
from spotgpu.checkpoint.retention import StoreSnapshot, plan_gc
from spotgpu.storage.store import ObjectInfo

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def obj(path: str, age_seconds: float) -> ObjectInfo:
    return ObjectInfo(path, 10, NOW - dt.timedelta(seconds=age_seconds))


def gen(step: int, session: str = "s") -> str:
    return f"{step:012d}-{session}"


def snapshot(committed: list[int], debris: dict[str, float]) -> StoreSnapshot:
    objects = [obj(f"generations/{gen(s)}/part-r00000.json", 10_000) for s in committed]
    objects += [obj(f"generations/{g}/r00000/00000-x", age) for g, age in debris.items()]
    objects += [obj(f"commits/{s:012d}.json", 10_000) for s in committed]
    return StoreSnapshot({s: gen(s) for s in committed}, tuple(objects))


def test_keep_last_k_retires_the_rest_commit_marker_first():
    plan = plan_gc(
        snapshot([1, 2, 3, 4], {}), retention=KeepLast(2), debris=GracePeriod(60), newest_verified_step=4, now=NOW
    )
    assert plan.kept_steps == [4, 3] and plan.retire_steps == [2, 1]
    assert plan.delete_paths == [f"generations/{gen(1)}/part-r00000.json", f"generations/{gen(2)}/part-r00000.json"]


def test_newest_verified_survives_even_outside_k():
    """Steps 5 and 4 are committed but corrupt; 3 is the newest that verifies."""
    plan = plan_gc(
        snapshot([1, 2, 3, 4, 5], {}), retention=KeepLast(2), debris=GracePeriod(60), newest_verified_step=3, now=NOW
    )
    assert plan.kept_steps == [5, 4, 3] and plan.retire_steps == [2, 1]


def test_debris_waits_for_the_grace_period_and_in_flight_saves():
    debris = {gen(9, "old"): 7200, gen(9, "young"): 30, gen(10, "mine"): 99999}
    plan = plan_gc(
        snapshot([1], debris),
        retention=KeepLast(5),
        debris=GracePeriod(3600),
        newest_verified_step=1,
        now=NOW,
        in_flight=[gen(10, "mine")],
    )
    assert plan.debris_generations == [gen(9, "old")]
    assert plan.young_debris_generations == [gen(9, "young")]
    assert plan.delete_paths == [f"generations/{gen(9, 'old')}/r00000/00000-x"]


def test_stray_commit_temporaries_are_debris():
    snap = StoreSnapshot({}, (obj("commits/.tmp-abc-000000000001.json", 7200), obj("commits/.tmp-new", 5)))
    plan = plan_gc(snap, retention=KeepLast(1), debris=GracePeriod(3600), newest_verified_step=None, now=NOW)
    assert plan.delete_paths == ["commits/.tmp-abc-000000000001.json"]


def test_retention_and_save_policies():
    assert KeepEveryNSteps(100).keep([300, 250, 200]) == {300, 200}
    assert AnyRetention((KeepLast(1), KeepEveryNSteps(100))).keep([300, 250, 200, 150]) == {300, 200}
    assert isinstance(KeepLast(1), RetentionPolicy) and isinstance(EveryNSteps(5), SavePolicy)
    every5 = EveryNSteps(5)
    assert every5.should_save(10, last_saved_step=5, seconds_since_save=1)
    assert not every5.should_save(10, last_saved_step=10, seconds_since_save=1)
    assert not every5.should_save(11, last_saved_step=10, seconds_since_save=1)
    timed = EveryNSeconds(600)
    assert timed.should_save(1, last_saved_step=None, seconds_since_save=None)
    assert not timed.should_save(2, last_saved_step=1, seconds_since_save=599)
    assert timed.should_save(2, last_saved_step=1, seconds_since_save=600)
    assert AnySavePolicy((every5, timed)).should_save(3, last_saved_step=1, seconds_since_save=601)
    for bad in (lambda: KeepLast(0), lambda: EveryNSteps(0), lambda: EveryNSeconds(0), lambda: GracePeriod(-1)):
        with pytest.raises(ValueError, match="fix"):
            bad()


def test_manager_should_save_uses_the_policy(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri(), save_policy=EveryNSteps(2))
    assert [s for s in range(1, 6) if mgr.should_save(s)] == [2, 4]
    assert CheckpointManager(tmp_path.as_uri()).should_save(7)


def test_gc_against_a_store_with_corruption_and_debris(tmp_path):
    url = tmp_path.as_uri()
    mgr = CheckpointManager(url, keep=10, grace_seconds=3600)
    for step in (1, 2, 3):
        mgr.save(step, {"x": str(step).encode() * 100})
    # Step 3 goes bad; a crashed save leaves old debris and a fresh one leaves young debris.
    (shard3,) = tmp_path.glob(f"shards/*/{mgr.list()[0].generation}/*.shard")
    shard3.write_bytes(b"rotten")
    for name, age in (("000000000004-crashed", 7200), ("000000000004-running", 5)):
        part = tmp_path / layout.shard_path(name, 0)
        part.parent.mkdir(parents=True)
        part.write_bytes(b"partial")
        os.utime(part, (time.time() - age, time.time() - age))

    report = CheckpointManager(url, keep=1, grace_seconds=3600).gc()
    assert report.newest_verified and report.newest_verified.startswith("000000000002-")
    # Step 3 failed verification: retired first, and it does not count against keep=1.
    assert [g[:12] for g in report.kept] == ["000000000002"]
    assert [g[:12] for g in report.retired] == ["000000000003", "000000000001"]
    assert [g[:12] for g in report.failed] == ["000000000003"]
    assert report.deleted_debris == ["000000000004-crashed"]
    assert report.young_debris == ["000000000004-running"]
    assert CheckpointManager(url).restore().step == 2  # type: ignore[union-attr]
    assert not (tmp_path / layout.shard_path("000000000004-crashed", 0)).exists()
