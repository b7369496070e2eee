"""Issue 22 item 4: a corrupt generation is retired.

The defects: after a corrupt generation was skipped, the resumed run could not save that
step again ("step 8 is already committed as ..."), logged only as a warning;
``wait_pending()`` did not raise; ``ckpt list`` still showed the corrupt generation as
``committed``; ``ckpt gc --keep 2`` kept it and counted it; ``keep=`` on the manager never
pruned; there was no ``gc --dry-run``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotgpu.checkpoint import CheckpointManager
from spotgpu.cli import main


def corrupt(root: Path, step: int) -> None:
    (shard,) = root.glob(f"shards/*/{step:012d}-*/r00000-000.shard")
    shard.write_bytes(b"rotten" + shard.read_bytes()[6:])


def saved(root: Path, steps: tuple[int, ...], keep: int = 10) -> CheckpointManager:
    mgr = CheckpointManager(root.as_uri(), keep=keep)
    for step in steps:
        mgr.save(step, {"x": b"%d" % step * 100})
    return mgr


def test_the_skipped_step_can_be_saved_again(tmp_path: Path) -> None:
    saved(tmp_path, (4, 8))
    corrupt(tmp_path, 8)
    resumed = CheckpointManager(tmp_path.as_uri())
    restored = resumed.restore()
    assert restored is not None and restored.step == 4 and restored.skipped
    info = resumed.save(8, {"x": b"again"})
    assert info.committed and info.step == 8
    assert CheckpointManager(tmp_path.as_uri()).restore().state["x"] == b"again"  # type: ignore[union-attr]


def test_a_healthy_step_of_another_attempt_still_conflicts(tmp_path: Path) -> None:
    from spotgpu.checkpoint import CommitConflictError

    saved(tmp_path, (8,))
    with pytest.raises(CommitConflictError, match="which verifies; fix"):
        CheckpointManager(tmp_path.as_uri()).save(8, {"x": b"other"})


def test_list_shows_a_verified_corrupt_generation_as_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved(tmp_path, (1, 2))
    corrupt(tmp_path, 2)
    url = tmp_path.as_uri()
    assert main(["ckpt", "verify", url]) == 1
    capsys.readouterr()
    assert main(["ckpt", "list", url, "--json"]) == 0
    rows = {r["step"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[2]["failed"] and "hash mismatch" in rows[2]["failed"] and rows[1]["failed"] is None
    assert main(["ckpt", "list", url]) == 0
    table = capsys.readouterr().out
    assert "failed" in table.splitlines()[1] and "committed" in table.splitlines()[2]


def test_gc_retires_the_failed_one_first_and_does_not_count_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved(tmp_path, (1, 2, 3))
    corrupt(tmp_path, 3)
    url = tmp_path.as_uri()
    CheckpointManager(url).restore()  # skips 3: the verdict is recorded
    assert main(["ckpt", "gc", url, "--keep", "2", "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dryRun"] and [g[:12] for g in dry["retired"]] == ["000000000003"]
    assert [g[:12] for g in dry["kept"]] == ["000000000002", "000000000001"]
    assert any("000000000003-" in p for p in dry["wouldDelete"])
    assert len(list(tmp_path.glob("commits/*.json"))) == 3, "a dry run deleted something"
    assert main(["ckpt", "gc", url, "--keep", "2", "--dry-run"]) == 0
    assert "would be retired (failed verification)" in capsys.readouterr().out
    assert main(["ckpt", "gc", url, "--keep", "2"]) == 0
    assert sorted(p.name[:12] for p in tmp_path.glob("commits/*.json")) == ["000000000001", "000000000002"]
    assert not list(tmp_path.glob("shards/*/000000000003-*/*")) and not list(tmp_path.glob("failed/*"))


def test_gc_never_retires_the_newest_verified(tmp_path: Path) -> None:
    saved(tmp_path, (1, 2))
    corrupt(tmp_path, 2)
    corrupt(tmp_path, 1)
    report = CheckpointManager(tmp_path.as_uri(), keep=1).gc()
    assert report.newest_verified is None and len(report.failed) == 2
    saved(tmp_path, (5,))
    corrupt(tmp_path, 5)
    ok = CheckpointManager(tmp_path.as_uri(), keep=1).gc()
    assert ok.newest_verified is None


def test_keep_is_enforced_after_each_commit(tmp_path: Path) -> None:
    mgr = saved(tmp_path, (1, 2, 3, 4), keep=2)
    assert [i.step for i in mgr.list()] == [4, 3]
    mgr.save_async(5, {"x": b"5"}).wait(30)
    assert [i.step for i in mgr.list()] == [5, 4]


def test_wait_pending_raises_what_the_background_save_raised(tmp_path: Path) -> None:
    saved(tmp_path, (8,))
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save_async(8, {"x": b"other"})  # another attempt's healthy step 8: a conflict
    from spotgpu.checkpoint import CommitConflictError

    with pytest.raises(CommitConflictError):
        mgr.wait_pending()
    mgr.wait_pending()  # raised once; the next call (and the next save) go on
    assert mgr.save(9, {"x": b"9"}).committed


def test_a_marker_retired_after_the_listing_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A concurrent gc retires a marker between the listing and the read: restore and list go on."""
    from spotgpu.checkpoint import reader
    from spotgpu.checkpoint.errors import ObjectMissingError

    saved(tmp_path, (1, 2))
    original = reader.read_commit

    def gone_for_step_2(store, step):  # type: ignore[no-untyped-def]
        if step == 2:
            raise ObjectMissingError("commits/000000000002.json does not exist")
        return original(store, step)

    monkeypatch.setattr(reader, "read_commit", gone_for_step_2)
    mgr = CheckpointManager(tmp_path.as_uri())
    restored = mgr.restore()
    assert restored is not None and restored.step == 1 and restored.skipped == []
    assert [i.step for i in mgr.list() if i.committed] == [1]
    assert not list(tmp_path.glob("failed/*"))
