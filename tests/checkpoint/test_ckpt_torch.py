"""PyTorch helpers: model, optimizer, scheduler, RNG and sampler state survive a restart."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from spotgpu.checkpoint import CheckpointManager  # noqa: E402
from spotgpu.checkpoint.torch import ResumableSampler, load_torch_state, torch_state  # noqa: E402


def build(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    model[0].register_buffer("bf16_buf", torch.randn(3, dtype=torch.bfloat16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    sampler = ResumableSampler(40, seed=seed)
    return model, opt, sched, sampler


def train(model, opt, sched, sampler_iter, steps: int) -> list[float]:
    data = torch.randn(40, 8, generator=torch.Generator().manual_seed(0))
    losses = []
    for _ in range(steps):
        idx = [next(sampler_iter) for _ in range(4)]
        noise = torch.randn(1).item() + np.random.rand() + random.random()  # every RNG matters
        loss = model(data[idx]).pow(2).mean() + noise * 0
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item() + noise)
    return losses


def test_resume_matches_an_uninterrupted_run(tmp_path):
    model, opt, sched, sampler = build(1)
    it = iter(sampler)
    train(model, opt, sched, it, 3)
    objects = {"model": model, "optim": opt, "sched": sched, "sampler": sampler}
    CheckpointManager(tmp_path.as_uri()).save(3, torch_state(objects))
    expected = train(model, opt, sched, it, 4)  # the run that was never interrupted

    model2, opt2, sched2, sampler2 = build(99)  # a fresh process with different init
    restored = CheckpointManager(tmp_path.as_uri()).restore()
    assert restored is not None
    load_torch_state(restored.state, {"model": model2, "optim": opt2, "sched": sched2, "sampler": sampler2})
    assert model2[0].bf16_buf.dtype == torch.bfloat16
    resumed = train(model2, opt2, sched2, iter(sampler2), 4)
    assert resumed == pytest.approx(expected, rel=1e-6)


def test_sampler_resumes_mid_epoch_and_shards_by_rank():
    s = ResumableSampler(10, seed=3)
    it = iter(s)
    first = [next(it) for _ in range(4)]
    state = s.state_dict()
    rest = list(it)
    s2 = ResumableSampler(10, seed=3)
    s2.load_state_dict(state)
    assert list(s2) == rest and sorted(first + rest) == list(range(10))
    shards = [list(ResumableSampler(10, seed=3, rank=r, world_size=2)) for r in (0, 1)]
    assert sorted(shards[0] + shards[1]) == list(range(10)) and not set(shards[0]) & set(shards[1])


def test_unsupported_values_are_named():
    class Odd:
        def state_dict(self):
            return {"fn": print}

        def load_state_dict(self, _):
            pass

    with pytest.raises(TypeError, match="odd: cannot checkpoint a builtin_function_or_method"):
        torch_state({"odd": Odd()}, rng=False)
    with pytest.raises(KeyError, match="no 'model' entry"):
        load_torch_state({}, {"model": torch.nn.Linear(1, 1)}, rng=False)
