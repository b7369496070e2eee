"""The lease, one process at a time: take, renew, refuse, expire, skew, release, fence (fake clocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotgpu.contract.state_store import MemoryJsonStore, ObjectJsonStore, StaleRecordError
from spotgpu.controller.lease import FENCE_FIELD, LEASE_KEY, FencedStore, Lease, LeaseLost

RECORD = "controller/record.json"


class Clock:
    def __init__(self) -> None:
        self.wall, self.mono = 1_000_000.0, 50.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def _pair(store: MemoryJsonStore | ObjectJsonStore, clock: Clock, skew_b: float = 0.0) -> tuple[Lease, Lease]:
    a = Lease(store, 60, 5, holder="a" * 8, wall=lambda: clock.wall, monotonic=lambda: clock.mono)
    b = Lease(store, 60, 5, holder="b" * 8, wall=lambda: clock.wall + skew_b, monotonic=lambda: clock.mono)
    return a, b


def test_first_taker_wins_and_the_other_is_told_why() -> None:
    clock, store = Clock(), MemoryJsonStore()
    a, b = _pair(store, clock)
    assert a.acquire().held and a.token == 1
    refused = b.acquire()
    assert not refused.held and "held by aaaaaaaa (token 1)" in refused.reason and "does nothing" in refused.reason
    clock.advance(30)
    renewed = a.acquire()
    assert renewed.held and renewed.reason == "renewed" and a.token == 1


def test_expiry_waits_for_the_skew_allowance_then_bumps_the_token() -> None:
    clock, store = Clock(), MemoryJsonStore()
    a, b = _pair(store, clock)
    a.acquire()
    clock.advance(64)  # past expiresAt (60) but inside the 5 s skew allowance
    assert not b.acquire().held
    assert not a.valid(), "the holder's own deadline passed at 60 s"
    clock.advance(2)
    taken = b.acquire()
    assert taken.held and b.token == 2 and "taken over from aaaaaaaa" in taken.reason


def test_a_contender_whose_clock_runs_ahead_within_the_skew_cannot_take_a_live_lease() -> None:
    clock, store = Clock(), MemoryJsonStore()
    a, b = _pair(store, clock, skew_b=4.9)
    a.acquire()
    clock.advance(59.9)
    assert a.valid()
    assert not b.acquire().held  # b thinks it is 64.8 s later: still inside 60 + 5


def test_a_paused_holder_writes_nothing_after_its_deadline_even_with_no_contender() -> None:
    clock, store = Clock(), MemoryJsonStore()
    a, _ = _pair(store, clock)
    fenced = FencedStore(store, a, (RECORD,))
    a.acquire()
    fenced.fence()
    assert fenced.get(RECORD) is None
    fenced.put(RECORD, {"n": 1})
    clock.advance(61)
    with pytest.raises(LeaseLost, match="expired or lost"):
        fenced.put(RECORD, {"n": 2})
    with pytest.raises(LeaseLost):
        fenced.put("drains/p/vm.json", {"requestedAt": 1})
    assert store.get(RECORD) == {"n": 1, FENCE_FIELD: 1}


def test_fencing_refuses_an_older_holders_in_flight_write() -> None:
    clock, store = Clock(), MemoryJsonStore()
    a, b = _pair(store, clock)
    fa, fb = FencedStore(store, a, (RECORD,)), FencedStore(store, b, (RECORD,))
    a.acquire()
    fa.fence()
    fa.get(RECORD)
    fa.put(RECORD, {"n": 1})
    fa.get(RECORD)  # a reads, then its write is delayed past expiry...
    clock.advance(70)
    b.acquire()
    fb.fence()  # ...b stamps token 2 on the record
    assert store.get(RECORD) == {"n": 1, FENCE_FIELD: 2}
    clock.mono -= 70  # even if a's local check were fooled, the store refuses the stale version
    a._deadline = clock.mono + 1
    with pytest.raises(LeaseLost, match="changed by another holder"):
        fa.put(RECORD, {"n": 99})
    with pytest.raises(LeaseLost, match="carries token 2"):
        fa.get(RECORD)


def test_release_lets_the_next_run_take_at_once() -> None:
    clock, store = Clock(), MemoryJsonStore()
    a, b = _pair(store, clock)
    a.acquire()
    a.release()
    assert not a.valid()
    assert b.acquire().held and b.token == 2
    assert store.get(LEASE_KEY)["holder"] == "b" * 8  # type: ignore[index]


def test_two_takers_racing_on_the_same_version_exactly_one_wins() -> None:
    store = MemoryJsonStore()
    seen = store.read(LEASE_KEY)
    store.write_if(LEASE_KEY, {"holder": "x", "token": 1, "expiresAt": 0}, seen)
    with pytest.raises(StaleRecordError):
        store.write_if(LEASE_KEY, {"holder": "y", "token": 1, "expiresAt": 0}, seen)


def test_a_stale_put_on_a_file_store_fails_loudly_instead_of_overwriting(tmp_path: Path) -> None:
    """Defect: on file:// ``put`` fell back to an unconditional write (obstore's local store has no
    conditional update), so a controller that read the record before another one wrote it silently
    overwrote that write; on S3, GCS and Azure the same put is refused."""
    mine, theirs = ObjectJsonStore(tmp_path.as_uri()), ObjectJsonStore(tmp_path.as_uri())
    mine.put(RECORD, {"n": 1})
    assert theirs.get(RECORD) == {"n": 1}
    mine.put(RECORD, {"n": 2})  # conditional on its own last write: still current
    with pytest.raises(StaleRecordError):
        theirs.put(RECORD, {"n": 0})  # read before mine's second write
    assert mine.get(RECORD) == {"n": 2}
    assert theirs.get(RECORD) == {"n": 2}
    theirs.put(RECORD, {"n": 3})  # after reading again, the write goes through
    assert ObjectJsonStore(tmp_path.as_uri()).get(RECORD) == {"n": 3}


def test_file_store_has_a_real_compare_and_swap(tmp_path: Path) -> None:
    store = ObjectJsonStore(tmp_path.as_uri())
    first = store.write_if("k.json", {"v": 1}, None)
    with pytest.raises(StaleRecordError):
        store.write_if("k.json", {"v": 1}, None)
    second = store.write_if("k.json", {"v": 2}, first)
    with pytest.raises(StaleRecordError):
        store.write_if("k.json", {"v": 3}, first)
    assert store.read("k.json").doc == {"v": 2}  # type: ignore[union-attr]
    clock = Clock()
    a, b = _pair(store, clock)
    assert a.acquire().held and not b.acquire().held
    assert second.version
