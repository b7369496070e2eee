"""Two controller processes on one record, on a local directory, moto's S3 and Azurite, started at the same time.

Each runs 200 ticks with random pauses (see ``lease_worker``). What must hold:

* exactly one holder per fencing token, and the record's history lists every
  write both processes believe succeeded, in order, with nondecreasing tokens:
  no lost update, no interleaving of two holders;
* a holder paused past its lease that wakes up writes nothing;
* both processes did act (the lease changes hands), and both were refused at times.

The long soak (thousands of ticks) is ``bench/lease_soak.py``.
"""

from __future__ import annotations

import json
import multiprocessing
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from lease_worker import RECORD, run_worker

from spotgpu.contract.state_store import ObjectJsonStore

TICKS = 200
TTL, SKEW = 0.25, 0.05


def _race(url: str, options: dict[str, Any], tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 2.0  # both start together, after the spawn cost
    procs, logs = [], []
    for i, name in enumerate(("a", "b")):
        log = tmp_path / f"{name}.jsonl"
        logs.append(log)
        kwargs = {"ticks": TICKS, "ttl": TTL, "skew": SKEW, "seed": 1000 + i, "start_at": start_at}
        procs.append(ctx.Process(target=run_worker, args=(name, url, options, str(log)), kwargs=kwargs))
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    entries = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    record = ObjectJsonStore(url, **options).get(RECORD)
    assert record is not None
    return entries, record


def _check(entries: list[dict[str, Any]], record: dict[str, Any]) -> None:
    for name in ("a", "b"):
        assert sum(e["name"] == name for e in entries) == TICKS
    acted = [e for e in entries if e["outcome"] == "acted"]
    # Every write a process believes succeeded is in the record, once, in counter order.
    assert record["counter"] == len(acted) == len(record["history"])
    assert sorted((e["name"], e["token"], e["n"]) for e in acted) == sorted(tuple(h) for h in record["history"])
    assert [h[2] for h in record["history"]] == list(range(1, len(acted) + 1))
    tokens = [h[1] for h in record["history"]]
    assert tokens == sorted(tokens), "a lower fencing token wrote after a higher one"
    holders: dict[int, set[str]] = {}
    for name, token, _ in record["history"]:
        holders.setdefault(token, set()).add(name)
    assert all(len(h) == 1 for h in holders.values()), f"two holders shared a token: {holders}"
    # A holder paused past its lease wrote nothing when it woke.
    paused = [e for e in entries if e.get("long_pause")]
    assert paused, "no long pause happened; the test did not exercise expiry"
    assert all(e["outcome"] == "write_refused" for e in paused), [e for e in paused if e["outcome"] != "write_refused"]
    # Both took part: the lease changed hands, and each was refused at least once.
    assert {e["name"] for e in acted} == {"a", "b"}
    assert {e["name"] for e in entries if e["outcome"] == "refused"} == {"a", "b"}
    assert len(holders) > 10


def test_two_controllers_on_a_local_directory(tmp_path: Path) -> None:
    """file:// goes through the same store layer as the checkpoints: compare-and-write under flock."""
    entries, record = _race((tmp_path / "store" / "_controller").as_uri(), {}, tmp_path)
    _check(entries, record)


def test_two_controllers_on_moto_s3(s3_server: dict[str, Any], tmp_path: Path) -> None:
    entries, record = _race(f"s3://ckpt/lease-{uuid.uuid4().hex[:8]}/_controller", s3_server, tmp_path)
    _check(entries, record)


@pytest.mark.azurite
def test_two_controllers_on_azurite(azurite: dict[str, Any], tmp_path: Path) -> None:
    entries, record = _race(f"az://devstoreaccount1/ckpt/lease-{uuid.uuid4().hex[:8]}/_controller", azurite, tmp_path)
    _check(entries, record)
