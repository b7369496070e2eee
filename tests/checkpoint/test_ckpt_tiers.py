"""Checkpoint tiers on real gloo groups of 4 ranks (issue 33): tier selection under every loss pattern.

Four nodes in two zones (a, b, a, b): each rank's shard has one copy on the next rank of a ring
that alternates zones (0 -> 1 -> 2 -> 3 -> 0). The gang saves steps 10, 20, 30 (every 2nd to the
store: 20), then nodes are lost (their directories deleted, replacements start empty) and a new
gang restores. Every rank must get the state it saved, bit for bit, from the nearest source that
verifies; a bad copy is never used and the notes say why.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ckpt_gloo import run_ranks
from tier_workers import restore_now, save_steps

from spotgpu.checkpoint.tiered.node import job_key

ZONES = ["a", "b", "a", "b"]
STEPS = [10, 20, 30]


def saved(root: Path, **kw: Any) -> None:
    run_ranks(save_steps, 4, root, [0, 1, 2, 3], ZONES, STEPS, kw.get("corrupt_arrival"), timeout=120)


def restored(root: Path, nodes: list[int]) -> list[dict[str, Any]]:
    run_ranks(restore_now, 4, root, nodes, ZONES, timeout=120)
    out = [json.loads((root / f"restored-r{r}.json").read_text()) for r in range(4)]
    for r in out:
        assert r["digest"] == r["expected"], "a restored state differs from what was saved"
    return out


def lose(root: Path, *nodes: int) -> None:
    for node in nodes:
        shutil.rmtree(root / f"node{node}")


@pytest.fixture(scope="module")
def saved_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiers")
    saved(root)
    return root


def fresh(saved_root: Path, tmp_path: Path) -> Path:
    """A copy of the saved gang's nodes and store, for one loss pattern."""
    root = tmp_path / "gang"
    shutil.copytree(saved_root, root, symlinks=True)
    old, new = job_key((saved_root / "store").as_uri()), job_key((root / "store").as_uri())
    for node in root.glob("node*"):
        (node / "local" / old).rename(node / "local" / new)  # the tier names a job by its store's URL
    return root


def test_the_save_places_each_copy_in_another_zone_and_uploads_every_second(saved_root: Path) -> None:
    doc = json.loads((saved_root / "saved-r0.json").read_text())
    assert doc["holders"][-1] == {"0": [1], "1": [2], "2": [3], "3": [0]}  # each holder in the other zone
    assert doc["uploads"] == [20]


def test_nothing_lost_every_rank_restores_from_its_own_tier(saved_root: Path, tmp_path: Path) -> None:
    out = restored(fresh(saved_root, tmp_path), [0, 1, 2, 3])
    assert [(r["step"], r["source"]) for r in out] == [(30, "local")] * 4
    assert all(r["nbytes"] > 1_000_000 for r in out)


def test_one_node_lost_its_replacement_pulls_from_the_peer(saved_root: Path, tmp_path: Path) -> None:
    root = fresh(saved_root, tmp_path)
    lose(root, 1)
    out = restored(root, [0, 4, 2, 3])  # node 4 replaces node 1
    assert [(r["step"], r["source"]) for r in out] == [(30, "local"), (30, "peer"), (30, "local"), (30, "local")]


def test_a_node_and_its_peer_lost_the_gang_falls_back_to_the_durable_step(saved_root: Path, tmp_path: Path) -> None:
    """Shard 1 of step 30 was on nodes 1 and 2 only: step 20 (in the store) is the newest every rank can get;
    the survivors still hold 20 (the tier keeps the newest durable generation), rank 2's from node 3."""
    root = fresh(saved_root, tmp_path)
    lose(root, 1, 2)
    out = restored(root, [0, 4, 5, 3])
    assert [(r["step"], r["source"]) for r in out] == [(20, "local"), (20, "store"), (20, "peer"), (20, "local")]


def test_a_whole_zone_lost_the_copies_in_the_other_zone_carry_the_newest_step(saved_root: Path, tmp_path: Path) -> None:
    root = fresh(saved_root, tmp_path)
    lose(root, 1, 3)  # zone b
    out = restored(root, [0, 4, 2, 5])
    assert [(r["step"], r["source"]) for r in out] == [(30, "local"), (30, "peer"), (30, "local"), (30, "peer")]


def test_every_node_lost_everything_comes_from_the_store(saved_root: Path, tmp_path: Path) -> None:
    root = fresh(saved_root, tmp_path)
    lose(root, 0, 1, 2, 3)
    out = restored(root, [4, 5, 6, 7])
    assert [(r["step"], r["source"]) for r in out] == [(20, "store")] * 4


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _shard_file(root: Path, node: int, shard: int, step: int) -> Path:
    files = [p for p in (root / f"node{node}" / "local").rglob("*") if p.is_file() and f"{step:012d}-" in str(p)
             and f"r{shard:05d}" in p.relative_to(root / f"node{node}" / "local").parts[1]]  # fmt: skip
    return max(files, key=lambda p: p.stat().st_size)


def test_a_corrupted_local_copy_is_never_used_the_rank_takes_its_peer_copy_and_says_why(
    saved_root: Path, tmp_path: Path
) -> None:
    root = fresh(saved_root, tmp_path)
    _corrupt(_shard_file(root, 0, 0, 30))
    out = restored(root, [0, 1, 2, 3])
    assert [(r["step"], r["source"]) for r in out] == [(30, "peer"), (30, "local"), (30, "local"), (30, "local")]
    assert any("rank 0: its own tier's copy of step 30 was not used" in n for n in out[0]["notes"])


def test_a_peer_copy_with_a_bad_hash_is_never_used_the_gang_goes_to_the_next_tier(saved_root: Path, tmp_path: Path) -> None:
    """Node 1 lost; the only copy of its shard of step 30 (on node 2) is corrupted: step 30 cannot be had for
    rank 1, so the gang restores step 20 (rank 1 again from node 2's intact copy of step 20), and every rank's
    notes say why; then the same with node 2's step-20 copy corrupted too: rank 1 reads the store."""
    root = fresh(saved_root, tmp_path)
    lose(root, 1)
    _corrupt(_shard_file(root, 2, 1, 30))
    out = restored(root, [0, 4, 2, 3])
    assert [(r["step"], r["source"]) for r in out] == [(20, "local"), (20, "peer"), (20, "local"), (20, "local")]
    assert any("rank 1: rank 2's copy of step 30 was not used" in n and "hash mismatch" in n for n in out[0]["notes"])
    root = fresh(saved_root, tmp_path / "again")
    lose(root, 1)
    _corrupt(_shard_file(root, 2, 1, 30))
    _corrupt(_shard_file(root, 2, 1, 20))
    out = restored(root, [0, 4, 2, 3])
    assert [(r["step"], r["source"]) for r in out] == [(20, "local"), (20, "store"), (20, "local"), (20, "local")]
    assert any("rank 2's copy of step 20 was not used" in n for n in out[1]["notes"])


def test_a_copy_corrupted_in_transit_is_not_counted_in_the_local_commit(tmp_path: Path) -> None:
    """Rank 2 receives a bad copy of rank 1's shard at every save: it is refused on arrival (hash), and the
    gang marker lists no holder for shard 1."""
    saved(tmp_path, corrupt_arrival=2)
    doc = json.loads((tmp_path / "saved-r0.json").read_text())
    assert doc["holders"][-1] == {"0": [1], "1": [], "2": [3], "3": [0]}
    assert not any((tmp_path / "node2" / "local").rglob("r00001/commits/*.json"))


def test_after_a_roll_back_the_new_timeline_saves_its_steps_again(tmp_path: Path) -> None:
    """Defect (found by the drill): after the gang fell back to a durable step, the survivors' tiers still held
    the abandoned timeline's newer steps, and re-saving one raised CommitConflictError on every rank."""
    import numpy as np

    from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager

    mgr = TieredCheckpointManager((tmp_path / "store").as_uri(), LocalTier(tmp_path / "local", keep=3, peer_copies=0,
                                                                           durable_every=100))  # fmt: skip
    for step in (5, 10, 15):
        mgr.save(step, {"w": np.full(8, step)})
    back = mgr.restore(max_step=5)  # as after losing the newer steps' copies
    assert back is not None and back.step == 5 and back.source == "local"
    mgr.save(10, {"w": np.full(8, 99)})  # the new timeline's step 10
    again = mgr.restore()
    assert again is not None and again.step == 10 and int(again.state["w"][0]) == 99
    mgr.close(10)


def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    import os

    from tests.doc_blocks import run_block

    env = {**os.environ, "SPOTGPU_LOCAL_DIR": str(tmp_path / "local"), "SPOTGPU_AGENT_CONFIG": str(tmp_path / "none")}
    assert run_block("checkpoints.md", "<!-- tested: tests/checkpoint/test_ckpt_tiers.py", tmp_path, env).strip() == "100 local 4096"
    assert any((tmp_path / "demo-store").rglob("commits/*.json"))  # the durable copy reached the store
