"""The local store's conditional writes between processes: flock-guarded compare-and-write, atomic rename."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from spotgpu.storage.errors import VersionMismatchError
from spotgpu.storage.local_store import LOCKS_DIR, TMP_PREFIX, LocalStore

WORKERS, INCREMENTS = 4, 40


def _increment(root: str, name: str, increments: int) -> None:
    """Read-modify-write ``counter.json`` ``increments`` times, retrying when another process won."""
    store = LocalStore(Path(root))
    done = 0
    while done < increments:
        body, seen = store.get_versioned("counter.json")
        doc = json.loads(body)
        doc["n"] += 1
        doc["by"].append(name)
        try:
            store.put_if("counter.json", json.dumps(doc).encode(), seen)
        except VersionMismatchError:
            continue
        done += 1


def test_racing_processes_lose_no_update(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put_if("counter.json", json.dumps({"n": 0, "by": []}).encode(), None)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_increment, args=(str(tmp_path), f"w{i}", INCREMENTS)) for i in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    doc = json.loads(store.get_versioned("counter.json")[0])
    assert doc["n"] == WORKERS * INCREMENTS == len(doc["by"])
    assert {name: doc["by"].count(name) for name in set(doc["by"])} == {f"w{i}": INCREMENTS for i in range(WORKERS)}


def test_a_write_by_an_unlocked_writer_still_makes_the_version_stale(tmp_path: Path) -> None:
    """The version is a digest of the content, so a plain ``put`` (which takes no lock) is seen too."""
    store = LocalStore(tmp_path)
    first = store.put_versioned("record.json", b"a")
    store.put("record.json", b"b")
    with pytest.raises(VersionMismatchError):
        store.put_if("record.json", b"c", first)
    assert store.get_versioned("record.json")[0] == b"b"


def test_create_only_put_if_loses_to_an_unlocked_create(tmp_path: Path) -> None:
    """put_if(None) links into place, so it is create-only even against put_if_absent, which takes no lock."""
    store = LocalStore(tmp_path)
    store.put_if_absent("commits/1.json", b"first")
    with pytest.raises(VersionMismatchError):
        store.put_if("commits/1.json", b"second", None)
    assert bytes(store.get("commits/1.json")) == b"first"


def test_locks_are_sidecar_files_and_no_temporary_is_left(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put_if("agents/pool/vm.json", b"{}", None)
    assert (tmp_path / LOCKS_DIR / "agents__pool__vm.json.lock").is_file()
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(TMP_PREFIX)]
    with pytest.raises(ValueError, match="relative"):
        store.put_if("../outside.json", b"{}", None)
    assert not (tmp_path.parent / "outside.json").exists()
