"""The gang's pure rules, tested directly: the MAX-reduced wire format, the check interval,
the collective timeout, the agreed restore (ranks as threads over an in-memory MAX)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from spotgpu.gang import EXIT_GANG_STOP, EXIT_PEER_LOST, Gang, GangRestoreError, choose_every, collective_timeout
from spotgpu.gang.agreement import LocalView, decode, encode, reduce_max


def test_one_notice_anywhere_is_the_whole_gangs_stop() -> None:
    quiet = LocalView(propose_every=4)
    noticed = LocalView(final=True, kind="preempt", budget_deadline=1000.0, propose_every=8)
    view = decode(reduce_max([encode(quiet, 0, 3), encode(noticed, 1, 3), encode(quiet, 2, 3)]), 3)
    assert (view.final, view.early, view.budget_deadline, view.every) == (True, False, 1000.0, 4)
    assert view.noticed == {1: ("final", "preempt")}


def test_the_smallest_noticed_budget_deadline_wins_and_final_beats_early() -> None:
    a = LocalView(final=True, kind="preempt", budget_deadline=1030.0)
    b = LocalView(final=True, kind="drain", budget_deadline=1010.0)
    c = LocalView(early=True, kind="rebalance")
    view = decode(reduce_max([encode(a, 0, 3), encode(b, 1, 3), encode(c, 2, 3)]), 3)
    assert view.budget_deadline == 1010.0 and view.final and not view.early
    assert view.noticed == {0: ("final", "preempt"), 1: ("final", "drain"), 2: ("early", "rebalance")}


def test_an_early_notice_alone_is_an_early_checkpoint_not_a_stop() -> None:
    view = decode(reduce_max([encode(LocalView(early=True, kind="maintenance"), 0, 2), encode(LocalView(), 1, 2)]), 2)
    assert (view.final, view.early, view.budget_deadline) == (False, True, None)


def test_a_final_notice_without_a_deadline_has_no_budget() -> None:
    assert decode(encode(LocalView(final=True, kind="preempt"), 0, 1), 1).budget_deadline == 0.0


@pytest.mark.parametrize(
    ("step", "check", "budget", "expected"),
    [
        (0.1, 0.0005, 30.0, 1),  # 100 ms steps: one check per step is 0.5 %
        (0.001, 0.0005, 30.0, 50),  # 1 ms steps: 50 steps keep it at 1 %
        (0.01, 0.05, 30.0, 150),  # a slow check: the budget caps the delay at 5 % of 30 s
        (2.0, 0.001, 30.0, 1),
    ],
)
def test_auto_every_is_cheap_enough_but_never_late(step: float, check: float, budget: float, expected: int) -> None:
    assert choose_every(step, check, budget) == expected


def test_collective_timeout_rule() -> None:
    assert collective_timeout(0.1).total_seconds() == 60.0  # the floor
    assert collective_timeout(5.0, save_seconds=40.0).total_seconds() == 135.0  # 3 x (step + save)
    assert collective_timeout(1.0, floor=2.0).total_seconds() == 3.0
    with pytest.raises(ValueError, match="step_seconds"):
        collective_timeout(-1.0)


def test_exit_codes_are_distinct_from_failures() -> None:
    assert (EXIT_GANG_STOP, EXIT_PEER_LOST) == (75, 76)


# -- agreed restore: ranks as threads, the all-reduce as an in-memory MAX ---------------
class ThreadReducer:
    def __init__(self, world: int) -> None:
        self.barrier = threading.Barrier(world)
        self.vectors: dict[int, list[float]] = {}
        self.result: list[float] = []

    def __call__(self, rank: int, values: list[float]) -> list[float]:
        self.vectors[rank] = values
        if self.barrier.wait() == 0:
            self.result = reduce_max(list(self.vectors.values()))
        self.barrier.wait()
        return list(self.result)


def thread_gang(rank: int, world: int, reducer: ThreadReducer) -> Gang:
    gang = Gang(None)
    gang.rank, gang.world_size, gang.distributed = rank, world, True
    gang._allreduce_max = lambda values, what, timeout=None: reducer(rank, values)  # type: ignore[method-assign]
    return gang


@dataclass
class Restored:
    step: int
    generation: str


class FakeManager:
    """Committed steps, of which some do not verify on this rank."""

    def __init__(self, steps: list[int], broken: set[int] = frozenset(), error: Exception | None = None) -> None:  # type: ignore[assignment]
        self.steps, self.broken, self.error = sorted(steps, reverse=True), broken, error
        self.calls: list[int | None] = []

    def restore(self, max_step: int | None = None) -> Restored | None:
        self.calls.append(max_step)
        if self.error is not None:
            raise self.error
        for step in self.steps:
            if (max_step is None or step <= max_step) and step not in self.broken:
                return Restored(step, f"g{step}")
        return None


def run_ranks(managers: list[FakeManager]) -> list[Any]:
    reducer = ThreadReducer(len(managers))
    out: list[Any] = [None] * len(managers)

    def one(rank: int) -> None:
        try:
            out[rank] = thread_gang(rank, len(managers), reducer).restore(managers[rank])
        except Exception as err:
            out[rank] = err

    threads = [threading.Thread(target=one, args=(r,)) for r in range(len(managers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return out


def test_every_rank_restores_the_newest_step_that_verifies_on_every_rank() -> None:
    out = run_ranks(
        [FakeManager([10, 20, 30]), FakeManager([10, 20, 30], broken={30}), FakeManager([10, 20, 30], broken={20, 30})]
    )
    assert [r.step for r in out] == [10, 10, 10]


def test_a_rank_with_nothing_makes_every_rank_start_from_scratch() -> None:
    assert run_ranks([FakeManager([10, 20]), FakeManager([])]) == [None, None]


def test_a_rank_that_cannot_restore_makes_every_rank_raise() -> None:
    from spotgpu.checkpoint import CheckpointError

    mismatch = CheckpointError("generation step 20 was written by 2 ranks, this job has 3; fix: ...")
    out = run_ranks([FakeManager([20]), FakeManager([20], error=mismatch), FakeManager([20])])
    assert out[1] is mismatch
    assert isinstance(out[0], GangRestoreError) and isinstance(out[2], GangRestoreError)


def test_a_gang_stop_exits_without_the_interpreters_teardown(tmp_path: Any) -> None:
    """Defect: a 4-rank job hung for good at its end: freeing the DDP model dropped its gloo
    group, whose destructor joins its worker with the GIL held while the worker waits for the
    GIL (pytorch/pytorch#56297). ``raise SystemExit(EXIT_GANG_STOP)`` in ``with gang:`` now
    ends the process at once, with its output flushed, and skips that teardown."""
    import subprocess
    import sys

    script = tmp_path / "job.py"
    script.write_text(
        "import atexit, sys\n"
        "from spotgpu.gang import EXIT_GANG_STOP, Gang\n"
        "atexit.register(lambda: print('teardown ran', flush=True))\n"
        "with Gang(None):\n"
        "    print('stopping', end='')  # unflushed: exit_now flushes it\n"
        "    raise SystemExit(EXIT_GANG_STOP)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_GANG_STOP, done.stderr
    assert done.stdout == "stopping"
