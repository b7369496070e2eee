"""The framework callbacks agree on the tier across the gang before they build their manager.

Defect (review): each rank resolved ``tier="auto"`` from its own VM. A gang with a rank on a fallback VM
without a local tier built a plain manager there (no collectives) while the others built the tiered one
(two new gloo groups and an all-gather): the collectives no longer matched and the gang hung. Now a rank
without a tier makes every rank save to the store.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("torch")

from ckpt_gloo import read_results, run_ranks, write_result


def _one_rank_tiered(rank: int, world: int, root: str) -> None:
    from spotgpu.checkpoint.tiered import LocalTier
    from spotgpu.integrations._base import SpotgpuCallbackCore
    from spotgpu.integrations._generations import files_under, pack_files

    os.environ["SPOTGPU_AGENT_CONFIG"] = str(Path(root) / "no-agent.json")
    tier = LocalTier(Path(root) / "local") if rank == 0 else None  # rank 1 landed on a VM without one
    core = SpotgpuCallbackCore(Path(root, "store").as_uri(), every_steps=2, tier=tier or "off")
    checkpoints = core._setup()
    framework = Path(root) / f"framework-r{rank}"
    framework.mkdir()
    (framework / "model.bin").write_bytes(b"weights of step 2, rank %d" % rank)
    checkpoints.save_periodic(2, pack_files(framework, files_under(framework)))
    checkpoints.close()
    restored = SpotgpuCallbackCore(Path(root, "store").as_uri(), every_steps=2, tier="off")._setup().restore()
    write_result(root, "setup", rank, {"tiered": checkpoints.tiered, "tier": core.tier is not None,
                                       "restored": None if restored is None else [restored.step, restored.source]})


def test_a_rank_without_a_tier_makes_every_rank_save_to_the_store(tmp_path: Path) -> None:
    run_ranks(_one_rank_tiered, 2, tmp_path, timeout=90)
    assert read_results(tmp_path, "setup", 2) == [{"tiered": False, "tier": False, "restored": [2, "store"]}] * 2
    assert not (tmp_path / "local").exists()  # rank 0's tier went unused
