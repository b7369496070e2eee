"""Peer copies off the training thread (issue 33 leftover: "peer copies block the save ... not made in the
background"), on real 2-rank gloo groups with hard timeouts (ranks killed by PID: ckpt_gloo.run_ranks).

The save thread's peer exchange is held by a gate (tier_workers.Gate) the training thread controls, so
what is checked is an order of events, not a timing: ``save_async`` returns while the copy is held, the
job's own collectives go on meanwhile, and the generation counts only after the copy landed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ckpt_gloo import run_ranks
from tier_workers import notice_during_copy, slow_exchange


def results(root: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads((root / f"{name}-r{r}.json").read_text()) for r in range(2)]


def test_save_async_returns_while_the_peer_copy_is_held_and_counts_only_once_it_lands(tmp_path: Path) -> None:
    run_ranks(slow_exchange, 2, tmp_path, timeout=180)
    for rank, r in enumerate(results(tmp_path, "slow")):
        assert r["entered"], "the peer exchange never started"
        # save_async returned with the copy held on the save thread: not counted, no gang marker on any node
        assert (r["status_while_held"], r["done_while_held"], r["markers_while_held"]) == ("writing", False, [])
        assert r["allreduce"] == [3.0] * 4  # the job's own collective ran meanwhile
        assert r["thread"] == "spotgpu-tier-save"
        # once released: committed, with each shard's copy verified on the other node
        assert (r["committed"], r["step"], r["markers"]) == (True, 10, [10])
        assert r["holders"] == {"0": [1], "1": [0]}, rank
        assert set(r["phases"]) == {"write", "agree", "copies", "check", "verify", "commit"}


def test_a_notice_during_a_background_copy_waits_for_it_then_commits_the_final_save_locally_and_to_the_store(
    tmp_path: Path,
) -> None:
    run_ranks(notice_during_copy, 2, tmp_path, 60.0, 5.0, timeout=180)
    for r in results(tmp_path, "notice"):
        assert r["stop"] and r["in_flight"], "the notice was meant to land while step 10's copy was in flight"
        assert r["committed"], r["reason"]
        assert "committed to the local tier and 1 peer cop(ies)" in r["reason"]
        assert "the object store: committed" in r["reason"]
        assert r["periodic"] == "committed"  # step 10's copies finished first
        assert r["markers"] == {"10": {"0": [1], "1": [0]}, "11": {"0": [1], "1": [0]}}
        assert 11 in r["store"]
        assert r["reports"][-1]["outcome"] == "committed"


def test_a_notice_whose_budget_ends_before_the_copy_in_flight_commits_nothing_on_any_rank(tmp_path: Path) -> None:
    """The copy in flight is held past the budget: no rank starts the final save (its collectives would queue
    behind the held ones), every rank reports the final checkpoint not committed, and step 11 counts nowhere;
    step 10 still commits once its copy lands."""
    run_ranks(notice_during_copy, 2, tmp_path, 2.0, 12.0, timeout=180)
    for r in results(tmp_path, "notice"):
        assert r["stop"] and r["in_flight"]
        assert not r["committed"]
        assert "not committed" in r["reason"] and "in flight used the whole budget" in r["reason"]
        assert r["reports"][-1]["outcome"] == "failed"
        assert set(r["markers"]) == {"10"}  # closed after the copy landed
        assert r["store"] == []


def test_a_final_save_of_the_step_just_saved_in_the_background_reuses_it_and_its_upload(tmp_path: Path) -> None:
    """The loop saves step 5 (save_async), then a notice stops it at step 5: the final save waits for that
    save and uploads it once, instead of writing and copying the same step again."""
    import numpy as np

    from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager

    mgr = TieredCheckpointManager((tmp_path / "store").as_uri(), LocalTier(tmp_path / "local", peer_copies=0),
                                  session="s1")  # fmt: skip
    try:
        handle = mgr.save_async(5, {"w": np.arange(1000, dtype=np.float32)})
        result = mgr.save_final(5, {"w": np.zeros(1000, dtype=np.float32)}, budget_seconds=60)
        assert handle.status() == "committed"
        assert result.committed, result.reason
        assert "committed in the background before the notice" in result.reason
        assert "the object store: committed" in result.reason
        mgr.close(30)
        assert [u.step for u in mgr.uploads()] == [5]  # one upload, shared by the periodic and the final save
        restored = mgr.restore()
        assert restored is not None and restored.step == 5 and float(restored.state["w"][1]) == 1.0
    finally:
        mgr.close(10)


def test_a_state_one_rank_cannot_copy_fails_the_save_on_every_rank_and_the_next_one_goes_on(tmp_path: Path) -> None:
    from tier_workers import bad_state_on_one_rank

    run_ranks(bad_state_on_one_rank, 2, tmp_path, timeout=180)
    for r in results(tmp_path, "bad"):
        assert "local save of step 10 failed on rank(s) [1]" in r["error"] and "object is not bytes" in r["error"]
        assert r["raised"] == r["error"]
        assert (r["next"], r["markers"]) == (20, [20])


def test_copies_of_many_rounds_to_two_peers_each_land_whole_and_restore_bit_for_bit(tmp_path: Path) -> None:
    """The transport keeps two rounds in flight with alternating buffers and tags: with 64 KiB chunks each ~1.2 MB
    copy takes ~20 rounds, every rank sends to two peers and receives from two; then node 1 is lost and its
    replacement pulls its shard from a peer's copy, bit for bit."""
    import shutil

    from tier_workers import many_rounds, restore_now

    run_ranks(many_rounds, 3, tmp_path, 64 << 10, timeout=180)
    for r in results3(tmp_path, "rounds"):
        assert r["holders"] == {"0": [1, 2], "1": [0, 2], "2": [0, 1]}  # every shard on both other nodes
    shutil.rmtree(tmp_path / "node1")
    run_ranks(restore_now, 3, tmp_path, [0, 3, 2], ["a", "b", "c"], timeout=180)
    out = [json.loads((tmp_path / f"restored-r{r}.json").read_text()) for r in range(3)]
    assert [(o["step"], o["source"]) for o in out] == [(2, "local"), (2, "peer"), (2, "local")]
    assert all(o["digest"] == o["expected"] for o in out)


def results3(root: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads((root / f"{name}-r{r}.json").read_text()) for r in range(3)]
