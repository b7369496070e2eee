"""Judge a decoded ``spotgpu-ladder`` the way the ladder model does, phrased for a reviewer."""

from __future__ import annotations

import itertools
import math

from spotgpu.contract.tags import DecodedStep
from spotgpu.models.ladder import MAX_STEP_WAIT_SECONDS, StepKind


def ladder_problems(steps: list[DecodedStep]) -> list[str]:
    """Every reason the ladder could wait forever or spend without limit; [] when sound."""
    if not steps:
        return ["the ladder has no steps"]
    problems = []
    for i, s in enumerate(steps):
        where = f"step {i + 1} ({s.kind.value})"
        if not (0 < s.max_wait_seconds <= MAX_STEP_WAIT_SECONDS):
            problems.append(f"{where} waits {s.max_wait_seconds:.0f} s; waits must be between 1 and "
                            f"{MAX_STEP_WAIT_SECONDS} s")
        if not math.isfinite(s.ceiling) or s.ceiling < 0:
            problems.append(f"{where} has cost ceiling {s.ceiling:g} {s.unit}; use a finite, non-negative ceiling")
        elif s.ceiling == 0 and s.kind is not StepKind.QUEUE_DEFER:
            problems.append(f"{where} has cost ceiling 0 {s.unit}, so it can never run")
    ranks = [s.kind.rank for s in steps]
    if any(b <= a for a, b in itertools.pairwise(ranks)):
        problems.append("steps are out of order; use same_pool, alternate_zone, alternate_sku, on_demand, "
                        "queue_defer, each at most once")
    if steps[-1].kind not in (StepKind.ON_DEMAND, StepKind.QUEUE_DEFER):
        problems.append(f"the ladder ends on {steps[-1].kind.value}, so the pool could wait for spot forever; "
                        "end it with on_demand or queue_defer")
    return problems
