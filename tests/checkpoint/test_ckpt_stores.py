"""The Store contract on every backend: local files, moto S3, Azurite Blob, GCS boundary."""

from __future__ import annotations

import pytest

from spotgpu.checkpoint.errors import ObjectExistsError, ObjectMissingError
from spotgpu.checkpoint.store import open_store


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

    from spotgpu.checkpoint import object_store

    def refuse(*_args, **_kwargs):
        raise PreconditionError("412 Precondition Failed")

    store = object_store.ObjectStore("gs://b/p", MemoryStore(), "p")
    monkeypatch.setattr(object_store.obstore, "put", refuse)
    with pytest.raises(ObjectExistsError):
        store.put_if_absent("commits/000000000001.json", b"x")
