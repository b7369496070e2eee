"""The Store contract on every backend: local files, moto S3, Azurite Blob, GCS boundary."""

from __future__ import annotations

import pytest

from spotgpu.checkpoint.errors import CheckpointError, ObjectExistsError, ObjectMissingError
from spotgpu.storage.errors import VersionMismatchError
from spotgpu.storage.store import open_store


def test_put_get_head_range_list_delete(store_factory):
    _url, store, _ = store_factory()
    store.put("a/b/one", b"hello world")
    store.put("a/two", memoryview(b"xyz"))
    store.put("big", iter([b"a" * (6 << 20), b"b" * (6 << 20), b"c"]))  # streamed, multipart on clouds
    assert bytes(store.get("a/b/one")) == b"hello world"
    assert store.head("a/two").size == 3
    assert store.get_range("a/b/one", 6, 11) == b"world"
    big = store.get("big")
    assert len(big) == (12 << 20) + 1 and big[-1:] == b"c" and big[(6 << 20) : (6 << 20) + 1] == b"b"
    out = bytearray(11)
    store.get_into("a/b/one", memoryview(out))
    assert out == b"hello world"
    with pytest.raises(ValueError, match="11 bytes"):
        store.get_into("a/b/one", memoryview(bytearray(3)))
    assert sorted(i.path for i in store.list("a/")) == ["a/b/one", "a/two"]
    assert sorted(i.path for i in store.list("")) == ["a/b/one", "a/two", "big"]
    store.delete("a/two")
    store.delete("a/two")  # deleting a missing object is fine
    with pytest.raises(ObjectMissingError):
        store.head("a/two")
    with pytest.raises(ObjectMissingError):
        store.get("a/two")


def test_put_if_absent_is_create_only(store_factory):
    """The commit primitive: S3 If-None-Match, Azure If-None-Match, GCS ifGenerationMatch=0, link(2)."""
    _url, store, _ = store_factory()
    store.put_if_absent("commits/1.json", b"first")
    with pytest.raises(ObjectExistsError):
        store.put_if_absent("commits/1.json", b"second")
    assert bytes(store.get("commits/1.json")) == b"first"


def test_put_if_is_create_only_then_update_if_unchanged(store_factory):
    """The controller record's and the lease's primitive: the ETag on S3 and Azure, the generation
    on GCS, a digest checked under flock locally. One writer of two racing on a version wins."""
    _url, store, _ = store_factory()
    with pytest.raises(ObjectMissingError):
        store.get_versioned("controller/lease.json")
    first = store.put_if("controller/lease.json", b'{"token":1}', None)
    with pytest.raises(VersionMismatchError, match="exists"):
        store.put_if("controller/lease.json", b'{"token":9}', None)
    body, seen = store.get_versioned("controller/lease.json")
    assert body == b'{"token":1}' and seen == first  # a read reports what the write returned
    second = store.put_if("controller/lease.json", b'{"token":2}', seen)
    assert second != first
    with pytest.raises(VersionMismatchError, match="changed since it was read"):
        store.put_if("controller/lease.json", b'{"token":3}', first)
    assert store.get_versioned("controller/lease.json") == (b'{"token":2}', second)
    store.delete("controller/lease.json")
    with pytest.raises(VersionMismatchError):
        store.put_if("controller/lease.json", b'{"token":3}', second)  # vanished since it was read
    assert [i.path for i in store.list("controller/")] == []


def test_put_versioned_is_unconditional_and_moves_the_version(store_factory):
    _url, store, _ = store_factory()
    mine = store.put_versioned("agents/vm.json", b"1")
    assert store.get_versioned("agents/vm.json") == (b"1", mine)
    theirs = store.put_versioned("agents/vm.json", b"22")  # another writer, blind
    with pytest.raises(VersionMismatchError):
        store.put_if("agents/vm.json", b"3", mine)
    assert store.put_if("agents/vm.json", b"3", theirs) != theirs
    assert bytes(store.get("agents/vm.json")) == b"3"


def test_store_errors_stay_checkpoint_errors():
    """``except CheckpointError`` around a read (verify, the DCP reader, the framework callbacks) must
    still catch the store's errors now that they come from the storage layer."""
    assert issubclass(ObjectMissingError, CheckpointError) and issubclass(ObjectExistsError, CheckpointError)


def test_put_overwrites_atomically(store_factory):
    _url, store, _ = store_factory()
    store.put("x", b"old")
    store.put("x", b"new!")
    assert bytes(store.get("x")) == b"new!"


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("ftp://host/x", "scheme 'ftp'"),
        ("s3:///prefix", "no bucket"),
        ("file://host/x", "has host"),
        ("s3://AKIA:secret@bucket/p", "'s3://***@bucket/p' has credentials in it"),
    ],
)
def test_bad_urls_name_the_value_and_the_fix(url, needle):
    with pytest.raises(ValueError, match="fix:") as err:
        open_store(url)
    assert needle in str(err.value)


def test_precondition_error_maps_to_exists(monkeypatch):
    """Real GCS answers a lost ifGenerationMatch=0 race with 412, which obstore may raise
    as PreconditionError rather than AlreadyExistsError; both mean "someone else won"."""
    from obstore.exceptions import PreconditionError
    from obstore.store import MemoryStore

    from spotgpu.storage import object_store

    def refuse(*_args, **_kwargs):
        raise PreconditionError("412 Precondition Failed")

    store = object_store.ObjectStore("gs://b/p", MemoryStore(), "p")
    monkeypatch.setattr(object_store.obstore, "put", refuse)
    with pytest.raises(ObjectExistsError):
        store.put_if_absent("commits/000000000001.json", b"x")
