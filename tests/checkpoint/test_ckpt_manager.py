"""CheckpointManager end to end on every backend, plus the commit protocol's edge cases."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from spotgpu.checkpoint import CheckpointManager, CommitConflictError, VerificationError, layout, writer
from spotgpu.checkpoint.errors import CommitTimeoutError
from spotgpu.checkpoint.snapshot import normalize
from tests.checkpoint.ckpt_files import flip_byte, part_file, shard_file


def sample_state(step: int) -> dict[str, object]:
    rng = np.random.default_rng(step)
    return {
        "weights": rng.standard_normal((64, 33), dtype=np.float32),
        "ints": np.arange(step, step + 10, dtype=np.int64),
        "scalar": np.array(3.5),
        "blob": f"step={step}".encode(),
        "empty": b"",
        "view": memoryview(bytearray(b"abc" * 100)),
    }


def assert_state_equal(got: dict[str, object], want: dict[str, object]) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, np.ndarray):
            assert isinstance(got[key], np.ndarray) and got[key].dtype == value.dtype
            np.testing.assert_array_equal(got[key], value)
        else:
            assert got[key] == bytes(value)


def manager(store_factory, **kwargs) -> CheckpointManager:
    url, store, _ = store_factory()
    return CheckpointManager(url, store=store, **kwargs)


def test_save_restore_list_verify_gc_on_every_backend(store_factory):
    mgr = manager(store_factory, keep=2, grace_seconds=0)
    assert mgr.restore() is None
    infos = {}
    for step in (10, 20, 30):
        infos[step] = info = mgr.save(step, sample_state(step))
        assert info.committed and info.step == step and info.world_size == 1
    restored = mgr.restore()
    assert restored is not None and restored.step == 30 and restored.skipped == []
    assert_state_equal(restored.state, sample_state(30))
    assert [i.step for i in mgr.list()] == [30, 20]  # keep=2 is enforced after each commit
    report = mgr.verify(restored.generation)
    # One shard object per rank, every byte of it checked (values, and the zeros between them).
    assert report.ok and report.objects_checked == 1
    assert report.bytes_checked >= sum(memoryview(v).nbytes for v in sample_state(30).values())
    gc = mgr.gc()
    assert gc.retired == [] and gc.newest_verified == infos[30].generation
    assert [i.step for i in mgr.list()] == [30, 20]
    assert mgr.restore().step == 30  # type: ignore[union-attr]


def test_async_save_on_every_backend(store_factory):
    mgr = manager(store_factory, memory_budget_bytes=4096)
    state = sample_state(5)
    expected = {k: (v.copy() if isinstance(v, np.ndarray) else bytes(v)) for k, v in state.items()}
    handle = mgr.save_async(5, state)
    state["weights"][:] = 0  # training goes on; the snapshot must not see this
    info = handle.wait(60)
    assert handle.status() == "committed" and info.step == 5
    assert_state_equal(mgr.restore().state, expected)  # type: ignore[union-attr]


def test_corrupt_object_falls_back_to_previous_generation(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri())
    for step in (1, 2, 3):
        mgr.save(step, sample_state(step))
    newest = mgr.list()[0].generation
    flip_byte(tmp_path, newest, "weights")

    fresh = CheckpointManager(tmp_path.as_uri())
    restored = fresh.restore()
    assert restored is not None and restored.step == 2
    assert restored.skipped and restored.skipped[0][0] == newest and "hash mismatch" in restored.skipped[0][1]
    assert_state_equal(restored.state, sample_state(2))
    report = fresh.verify(newest)
    assert not report.ok and "hash mismatch" in report.problems[0]


@pytest.mark.parametrize("damage", ["delete_part", "truncate_object", "garbage_commit", "tamper_part"])
def test_every_kind_of_damage_is_skipped(tmp_path, damage):
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, sample_state(1))
    mgr.save(2, sample_state(2))
    gen = mgr.list()[0].generation
    if damage == "delete_part":
        part_file(tmp_path, gen).unlink()
    elif damage == "truncate_object":
        shard = shard_file(tmp_path, gen)
        shard.write_bytes(shard.read_bytes()[:-1])
    elif damage == "garbage_commit":
        (tmp_path / "commits" / "000000000002.json").write_bytes(b"{not json")
    else:
        part = part_file(tmp_path, gen)
        part.write_bytes(part.read_bytes().replace(b'"size":', b'"size": ', 1))
    restored = CheckpointManager(tmp_path.as_uri()).restore()
    assert restored is not None and restored.step == 1 and len(restored.skipped) == 1


def race_two_writers(url: str, step: int, trial: int) -> dict[str, object]:
    """Two attempts (a zombie and its replacement) save the same step at the same moment."""
    managers = {name: CheckpointManager(url, session=f"{name}{trial}") for name in ("a", "b")}
    results: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def run(name: str) -> None:
        barrier.wait()
        try:
            results[name] = managers[name].save(step, {"who": name.encode()})
        except CommitConflictError as err:
            results[name] = err

    threads = [threading.Thread(target=run, args=(name,)) for name in managers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_same_step_two_writers_only_one_commits(tmp_path):
    url = tmp_path.as_uri()
    for trial in range(10):
        step = trial + 1
        results = race_two_writers(url, step, trial)
        winners = [n for n, r in results.items() if not isinstance(r, Exception)]
        assert len(winners) == 1, results
        restored = CheckpointManager(url).restore()
        assert restored is not None and restored.step == step and restored.state["who"] == winners[0].encode()


def test_commit_conflict_is_reported_before_writing(tmp_path):
    url = tmp_path.as_uri()
    CheckpointManager(url, session="first").save(7, {"x": b"1"})
    with pytest.raises(CommitConflictError, match="already committed"):
        CheckpointManager(url, session="second").save(7, {"x": b"2"})
    again = CheckpointManager(url, session="first").save(7, {"x": b"1"})  # idempotent retry
    assert again.generation == layout.generation_name(7, "first")


def test_two_ranks_commit_only_after_both_parts(tmp_path):
    url = tmp_path.as_uri()
    ranks = [CheckpointManager(url, rank=r, world_size=2, session="job1", commit_timeout_seconds=20) for r in (0, 1)]
    infos: dict[int, object] = {}
    rank1_go = threading.Event()

    def save(rank: int) -> None:
        if rank == 1:
            rank1_go.wait()
        infos[rank] = ranks[rank].save(4, {"shard": np.full(10, rank, dtype=np.int32)})

    t0 = threading.Thread(target=save, args=(0,))
    t0.start()
    t0.join(0.5)
    assert t0.is_alive(), "rank 0 must wait for rank 1's part"
    assert not (tmp_path / "commits").exists()
    rank1_go.set()
    t1 = threading.Thread(target=save, args=(1,))
    t1.start()
    t0.join(20)
    t1.join(20)
    assert infos[0] == infos[1]
    for rank in (0, 1):
        restored = CheckpointManager(url, rank=rank, world_size=2, session="job1").restore()
        assert restored is not None and int(restored.state["shard"][0]) == rank
    assert CheckpointManager(url).verify(4).ok


def test_coordinator_times_out_without_every_part(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri(), rank=0, world_size=3, session="s", commit_timeout_seconds=0.3)
    with pytest.raises(CommitTimeoutError, match="rank 1"):
        mgr.save(1, {"x": b"1"})
    assert mgr.list()[0].committed is False


def test_multi_rank_needs_a_shared_session(tmp_path, monkeypatch):
    for var in ("SPOTGPU_CKPT_SESSION", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="session"):
        CheckpointManager(tmp_path.as_uri(), rank=0, world_size=2)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "Run-42")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "3")
    assert CheckpointManager(tmp_path.as_uri(), rank=1, world_size=2).session == "run42r3"


def test_commit_rejects_a_part_from_another_generation(tmp_path):
    from spotgpu.storage.store import open_store

    store = open_store(tmp_path.as_uri())
    items = normalize({"x": b"1"})
    writer.write_part(store, layout.generation_name(1, "aaa"), 1, 0, 1, items, "xxh3_128")
    # Copy the part under another generation's name: the coordinator must notice.
    other = layout.generation_name(1, "bbb")
    store.put(layout.part_path(other, 0), store.get(layout.part_path(layout.generation_name(1, "aaa"), 0)))
    with pytest.raises(VerificationError, match="expected"):
        writer.commit(store, other, 1, 1, "xxh3_128", timeout=1)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"rank": 2, "world_size": 2}, "rank"),
        ({"world_size": 0}, "world_size"),
        ({"memory_budget_bytes": 0}, "memory_budget_bytes"),
        ({"keep": 0}, "keep"),
        ({"grace_seconds": -1}, "grace_seconds"),
        ({"hash_algorithm": "md5"}, "hash"),
        ({"session": "Bad Token"}, "session"),
    ],
)
def test_bad_arguments_name_the_field(tmp_path, kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        CheckpointManager(tmp_path.as_uri(), **kwargs)


@pytest.mark.parametrize(
    ("state", "needle"),
    [
        ({"x": [1, 2]}, "list is not bytes"),
        ({"": b"x"}, "non-empty str"),
        ({"o": np.array([object()])}, "not a plain numeric dtype"),
    ],
)
def test_bad_state_is_rejected_before_writing(tmp_path, state, needle):
    mgr = CheckpointManager(tmp_path.as_uri())
    with pytest.raises(TypeError, match=needle):
        mgr.save(1, state)
    assert mgr.list() == []


def test_other_hash_algorithms_round_trip(tmp_path):
    for algorithm in ("blake3", "sha256"):
        url = (tmp_path / algorithm).as_uri()
        CheckpointManager(url, hash_algorithm=algorithm).save(1, sample_state(1))
        restored = CheckpointManager(url).restore()  # the reader takes the algorithm from the manifest
        assert restored is not None
        assert_state_equal(restored.state, sample_state(1))


def test_non_contiguous_arrays_are_saved_by_value(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri())
    base = np.arange(100, dtype=np.float64).reshape(10, 10)
    mgr.save(1, {"t": base.T, "s": base[::2, 1::3]})
    state = mgr.restore().state  # type: ignore[union-attr]
    np.testing.assert_array_equal(state["t"], base.T)
    np.testing.assert_array_equal(state["s"], base[::2, 1::3])


def test_restore_into_existing_arrays_falls_back_in_place(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, sample_state(1))
    mgr.save(2, sample_state(2))
    newest = mgr.list()[0].generation
    flip_byte(tmp_path, newest, "ints", at=0.0)
    into = {"weights": np.zeros((64, 33), dtype=np.float32), "ints": np.zeros(10, dtype=np.int64)}
    restored = CheckpointManager(tmp_path.as_uri()).restore(into=into)
    assert restored is not None and restored.step == 1 and len(restored.skipped) == 1
    assert restored.state["weights"] is into["weights"] and restored.state["ints"] is into["ints"]
    assert_state_equal(restored.state, sample_state(1))


def test_restore_into_an_array_of_the_wrong_shape_is_refused(tmp_path):
    mgr = CheckpointManager(tmp_path.as_uri())
    mgr.save(1, {"w": np.ones(4, dtype=np.float32)})
    """A caller error must not look like a corrupt checkpoint (and silently restart from 0)."""
    with pytest.raises(TypeError, match="fix"):
        mgr.restore(into={"w": np.zeros(5, dtype=np.float32)})
    with pytest.raises(TypeError, match="<f8"):
        mgr.restore(into={"w": np.zeros(4, dtype=np.float64)})
    with pytest.raises(TypeError, match="C-contiguous"):
        mgr.restore(into={"w": np.zeros(8, dtype=np.float32)[::2]})
