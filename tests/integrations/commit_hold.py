"""A periodic save still in flight when the notice comes, made certain, and the order of events logged.

``install(step, out, rank)`` (a job's ``--hold-commit STEP``): the tier's background commit of ``step``
(steps 3-6 of spotgpu/checkpoint/tiered/manager.py) waits until this rank has begun the gang's final
checkpoint, at most :data:`HOLD_SECONDS`; ``OUT/events-rR.jsonl`` records, in order, when the callback's
save call returned, when the held commit began and ended, and when the final checkpoint began. A
callback whose periodic save waited for its commit returns only after the hold timed out, so the log
shows it (and the final checkpoint then finds nothing in flight).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from spotgpu.checkpoint.tiered import TieredCheckpointManager
from spotgpu.integrations._base import SpotgpuCallbackCore
from spotgpu.integrations._generations import FrameworkCheckpoints

HOLD_SECONDS = 30.0


def events(out: Path, rank: int) -> list[tuple[str, int]]:
    """(what, step) in the order they happened on ``rank``."""
    lines = (out / f"events-r{rank}.jsonl").read_text().splitlines()
    return [(e["what"], e["step"]) for e in map(json.loads, lines)]


def install(step: int, out: Path, rank: int) -> None:
    log, final = out / f"events-r{rank}.jsonl", out / f"final-started-r{rank}"

    def event(what: str, at: int) -> None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"what": what, "step": at}) + "\n")

    commit_local = TieredCheckpointManager._commit_local

    def held(self: TieredCheckpointManager, at: int, *args: Any) -> Any:
        if at == step:
            event("commit-held", at)
            end = time.monotonic() + HOLD_SECONDS
            while not final.exists() and time.monotonic() < end:
                time.sleep(0.01)
        try:
            return commit_local(self, at, *args)
        finally:
            event("commit-ended", at)

    commit = SpotgpuCallbackCore._commit

    def logged(self: SpotgpuCallbackCore, kind: str, at: int, state: Any) -> Any:
        result = commit(self, kind, at, state)
        event(f"{kind}-returned", at)
        return result

    save_final = FrameworkCheckpoints.save_final

    def final_save(self: FrameworkCheckpoints, at: int, state: Any, budget_seconds: float) -> Any:
        event("final-started", at)
        final.write_text("started")
        return save_final(self, at, state, budget_seconds)

    TieredCheckpointManager._commit_local = held  # type: ignore[method-assign]
    SpotgpuCallbackCore._commit = logged  # type: ignore[method-assign]
    FrameworkCheckpoints.save_final = final_save  # type: ignore[method-assign]
