"""Two pure rules the gang needs from step and save times: how long a collective may block,
and how often the stop check runs. Tested directly; the constants are the documented rule."""

from __future__ import annotations

import datetime
import math

#: No collective timeout below this: scheduler noise, a GC pause or a slow first step must not kill a job.
MIN_TIMEOUT_SECONDS = 60.0
#: A collective may wait this many times the longest legitimate gap between two collectives.
TIMEOUT_SLACK = 3.0
#: The shortest final-checkpoint budget a job should plan for (GCP's 0 s notice leaves 30 s).
DEFAULT_BUDGET_SECONDS = 30.0
#: ``every="auto"``: keep the agreement under this share of step time ...
OVERHEAD_TARGET = 0.01
#: ... but learn of a notice within this share of the budget.
DELAY_SHARE_OF_BUDGET = 0.05
MAX_EVERY = 10_000


def collective_timeout(
    step_seconds: float, save_seconds: float = 0.0, *, slack: float = TIMEOUT_SLACK, floor: float = MIN_TIMEOUT_SECONDS
) -> datetime.timedelta:
    """What a job passes to ``init_process_group(timeout=...)``.

    The longest legitimate wait inside a collective is one rank still finishing a step or a
    periodic save (``save_seconds``: the slowest save of the profile) while the others already
    wait in the next collective. Anything ``slack`` times longer is a stalled peer:
    ``max(floor, slack * (step_seconds + save_seconds))``. A SIGKILLed peer is noticed at
    once (gloo: "Connection reset by peer" within ~0.1 s); this bound is for a peer that
    stalls without closing its sockets (SIGSTOP, a hung host, a network partition).
    """
    if step_seconds < 0 or save_seconds < 0:
        raise ValueError(f"step_seconds={step_seconds}, save_seconds={save_seconds}: must be >= 0")
    return datetime.timedelta(seconds=max(floor, slack * (step_seconds + save_seconds)))


def choose_every(
    step_seconds: float,
    check_seconds: float,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    *,
    overhead_target: float = OVERHEAD_TARGET,
    delay_share: float = DELAY_SHARE_OF_BUDGET,
) -> int:
    """Steps between stop checks for ``every="auto"``.

    The fewest steps that keep one check (``check_seconds``) under ``overhead_target`` of the
    steps it covers, but never so many that a notice waits longer than ``delay_share`` of the
    budget to be agreed. The budget wins when the two disagree: a late stop loses the final
    checkpoint, a little overhead loses nothing.
    """
    if step_seconds <= 0:
        return 1
    cheap_enough = math.ceil(check_seconds / (overhead_target * step_seconds)) if check_seconds > 0 else 1
    soon_enough = math.floor(delay_share * budget_seconds / step_seconds)
    return max(1, min(cheap_enough, soon_enough, MAX_EVERY))
