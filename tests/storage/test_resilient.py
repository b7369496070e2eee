"""The storage layer's one rule book for transient errors (issue 32, item 3), on every backend.

Faults are injected below ``ResilientStore`` (``FaultyStore``), on a local directory, moto S3
and Azurite: a reset before the request left, a reply lost after the store applied it, a body
cut in half, 503 bursts. Each test checks the outcome *and* the bytes the store holds."""

from __future__ import annotations

import time

import pytest

from spotgpu.contract.state_store import ObjectJsonStore, StaleRecordError
from spotgpu.storage.errors import (
    ObjectExistsError,
    StoreUnavailableError,
    TransientStoreError,
    VersionMismatchError,
)
from spotgpu.storage.faults import CountingStore, FaultyStore
from spotgpu.storage.resilient import ResilientStore, RetryPolicy

FAST = RetryPolicy(first_backoff=0.01, max_backoff=0.05, max_seconds=20)


def stack(backend):  # type: ignore[no-untyped-def]
    bare = backend()
    faulty = FaultyStore(bare)
    return bare, faulty, ResilientStore(faulty, FAST)


@pytest.mark.parametrize("kind", ["lost_reply", "reset"])
def test_a_create_only_write_with_an_unknown_outcome_is_resolved_by_reading_back(backend, kind):
    """The defect: a create-only PUT whose reply was lost (applied) or whose connection was
    reset (not applied) reached the caller as a transport error, though it may have committed."""
    bare, faulty, store = stack(backend)
    faulty.add(kind, "put_if_absent", "commits/")
    store.put_if_absent("commits/000000000001.json", b"ours")
    assert bytes(bare.get("commits/000000000001.json")) == b"ours"
    assert store.stats["resolved:ours" if kind == "lost_reply" else "resolved:absent"] == 1


def test_an_unknown_outcome_that_turns_out_to_be_another_writers_is_a_conflict(backend):
    bare, faulty, store = stack(backend)
    bare.put_if_absent("commits/000000000002.json", b"theirs")
    faulty.add("reset", "put_if_absent", "commits/")
    with pytest.raises(ObjectExistsError, match="another writer"):
        store.put_if_absent("commits/000000000002.json", b"ours")
    assert bytes(bare.get("commits/000000000002.json")) == b"theirs"
    assert store.stats["resolved:theirs"] == 1


@pytest.mark.parametrize("kind", ["lost_reply", "reset"])
def test_a_conditional_update_with_an_unknown_outcome_is_resolved(backend, kind):
    """The controller's record and lease: update-if-unchanged whose answer was lost."""
    bare, faulty, store = stack(backend)
    first = store.put_if("controller/lease.json", b'{"holder":"a","n":1}', None)
    faulty.add(kind, "put_if", "lease")
    second = store.put_if("controller/lease.json", b'{"holder":"a","n":2}', first)
    body, version = bare.get_versioned("controller/lease.json")
    assert body == b'{"holder":"a","n":2}' and version == second
    with pytest.raises(VersionMismatchError):  # the first version is really gone
        store.put_if("controller/lease.json", b'{"holder":"b"}', first)


def test_a_conditional_update_that_lost_to_another_writer_is_still_a_conflict(backend):
    bare, faulty, store = stack(backend)
    first = store.put_if("controller/lease.json", b'{"holder":"a"}', None)
    bare.put_versioned("controller/lease.json", b'{"holder":"b"}')
    faulty.add("reset", "put_if", "lease")
    with pytest.raises(VersionMismatchError):
        store.put_if("controller/lease.json", b'{"holder":"a","n":2}', first)
    assert bare.get_versioned("controller/lease.json")[0] == b'{"holder":"b"}'


def test_the_controller_record_rides_out_a_lost_reply(backend):
    """ObjectJsonStore (records and leases) goes through the same rules: no StaleRecordError
    for its own write whose answer was lost."""
    bare = backend()
    faulty = FaultyStore(bare)
    records = ObjectJsonStore(bare.url, store=faulty)
    records.write_if("controller/record.json", {"rev": 1}, None)
    seen = records.read("controller/record.json")
    faulty.add("lost_reply", "put_if", "record")
    records.write_if("controller/record.json", {"rev": 2}, seen)
    assert records.read("controller/record.json").doc == {"rev": 2}  # type: ignore[union-attr]
    with pytest.raises(StaleRecordError):
        records.write_if("controller/record.json", {"rev": 3}, seen)


@pytest.mark.parametrize("op", ["get", "list", "get_range"])
def test_a_cut_body_is_retried_and_resumed(backend, op):
    bare, faulty, store = stack(backend)
    payload = bytes(range(256)) * 400
    for name in ("a/x", "a/y", "a/z", "a/w"):
        bare.put(name, payload)
    faulty.add("truncate", op, "a/")
    if op == "get":
        assert bytes(store.get("a/x")) == payload
    elif op == "list":
        assert sorted(i.path for i in store.list("a/")) == ["a/w", "a/x", "a/y", "a/z"]
    else:
        out = [memoryview(bytearray(1000)), memoryview(bytearray(0)), memoryview(bytearray(5000))]
        pieces: list[tuple[int, int]] = []
        store.get_range_into("a/x", 100, out, lambda i, piece: pieces.append((i, piece.nbytes)))
        assert bytes(out[0]) + bytes(out[2]) == payload[100:6100]
        assert sum(n for _, n in pieces) == 6000  # every byte handed over exactly once
    assert store.stats[f"retry:{'get_range' if op == 'get_range' else op}"] >= 1


def test_a_503_burst_is_ridden_out(backend):
    _bare, faulty, store = stack(backend)
    faulty.add("slowdown", "put", "", times=6)
    faulty.add("slowdown", "get", "", times=6)
    store.put("x", b"payload")
    assert bytes(store.get("x")) == b"payload"


def test_retries_stop_at_the_deadline_with_one_line(backend):
    _bare, faulty, store = stack(backend)
    faulty.add("reset", "put_if_absent", "", times=10_000)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as err:
        store.within(started + 1.0).put_if_absent("commits/000000000003.json", b"x")
    assert time.monotonic() - started < 2.0
    line = str(err.value)
    assert "\n" not in line and "commits/000000000003.json" in line and "the deadline" in line and "reset" in line


def test_a_one_shot_stream_is_resolved_by_size_or_fails_with_the_reason(backend):
    bare, faulty, store = stack(backend)
    faulty.add("lost_reply", "put", "stream-a")
    store.put("stream-a", iter([b"x" * 1000, b"y" * 24]))  # applied, answer lost: the size decides
    assert bytes(bare.get("stream-a")) == b"x" * 1000 + b"y" * 24
    faulty.add("reset", "put", "stream-b")
    store.put("stream-b", iter([b"z" * 10]))  # reset before a chunk was taken: sent again
    assert bytes(bare.get("stream-b")) == b"z" * 10


def test_a_one_shot_stream_cut_midway_fails_with_the_reason() -> None:
    class CutsMidway:
        url = "memory://x"

        def put(self, path, data):  # type: ignore[no-untyped-def]
            next(iter(data))
            raise TransientStoreError("connection reset")

    with pytest.raises(StoreUnavailableError, match="one-shot stream"):
        ResilientStore(CutsMidway(), FAST).put("p", iter([b"a", b"b"]))


def test_permanent_errors_are_not_retried(backend):
    _bare, _faulty, store = stack(backend)
    counting = CountingStore(store.inner)
    resilient = ResilientStore(counting, FAST)
    resilient.put_if_absent("k", b"1")
    with pytest.raises(ObjectExistsError):
        resilient.put_if_absent("k", b"2")
    assert counting.total(op="put_if_absent") == 2  # one each: a conflict is an answer, not a fault
