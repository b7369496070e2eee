"""A commit agreement's collectives never share a group with the job's own.

``save_async`` runs the save, and so the agreement's two collectives, on a background thread
while training goes on issuing its own collectives. Over one group the two threads' calls
interleave in a different order on each rank: gloo pairs the wrong operations (a size mismatch,
a hang until the timeout). The agreement therefore runs on a group of its own, made at
construction by every rank, used only by the saves, which run one at a time in step order.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def _worker(rank: int, world: int, root: str, use_gang: bool) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    from ckpt_gloo import write_result

    from spotgpu.checkpoint import CheckpointManager
    from spotgpu.checkpoint.collective import ProcessGroupAgreement
    from spotgpu.gang import Gang

    agreement = Gang(client=None).commit_agreement() if use_gang else ProcessGroupAgreement()
    assert agreement.group is not None  # its own group, not the job's (None: the world)
    url = Path(root, "store").as_uri()
    mgr = CheckpointManager(url, rank=rank, world_size=world, session="bg", agreement=agreement)
    total = torch.zeros(1)
    for step in range(1, 41):
        if step % 10 == 0:
            mgr.save_async(step, {"w": np.full(4096, step + rank, dtype=np.float32)})
        x = torch.ones(1)
        dist.all_reduce(x)  # the job's collective, on the world group, meanwhile
        total += x
        if step % 10 == 5 and step > 10:
            mgr.wait_pending()
    mgr.wait_pending()
    committed = sorted(g.step for g in mgr.list() if g.committed)
    write_result(root, "bg", rank, {"total": float(total.item()), "committed": committed})


@pytest.mark.timeout(150)
@pytest.mark.parametrize("use_gang", [False, True], ids=["ProcessGroupAgreement", "Gang.commit_agreement"])
def test_background_saves_with_an_agreement_do_not_disturb_the_jobs_collectives(tmp_path: Path, use_gang: bool) -> None:
    from ckpt_gloo import read_results, run_ranks

    run_ranks(_worker, 2, tmp_path, use_gang, timeout=120)
    r0, r1 = read_results(tmp_path, "bg", 2)
    assert r0["total"] == r1["total"] == 80.0  # every all_reduce summed both ranks' ones
    assert r0["committed"] == r1["committed"] == [10, 20, 30, 40]
