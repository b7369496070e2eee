"""When the callbacks save: every N steps, or every T seconds turned into steps all ranks share.

A save commits only when every rank writes its part of the same step, so ranks must never
decide by their own clocks. A seconds interval (the workload profile's
``checkpointIntervalSeconds``, i.e. ``spotgpu.economics.interval.choose_interval(...).seconds``)
becomes a step count from the measured step time; the time is agreed (MAX over ranks) at
points every rank reaches at the same step: once after ``probe_steps``, then at every save.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from spotgpu.contract.vm import AGENT_CONFIG_ENV, AGENT_CONFIG_PATH


@dataclass
class SaveSchedule:
    every_steps: int | None = None
    every_seconds: float | None = None
    probe_steps: int = 10
    _next_save: int | None = field(default=None, init=False)
    _next_timing: int | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if (self.every_steps is None) == (self.every_seconds is None):
            raise ValueError(
                f"every_steps={self.every_steps!r}, every_seconds={self.every_seconds!r}: give exactly one; "
                "fix: every_seconds=<the profile's checkpoint interval> or every_steps=N"
            )
        if self.every_steps is not None and (isinstance(self.every_steps, bool) or self.every_steps < 1):
            raise ValueError(f"every_steps: {self.every_steps!r} must be an int >= 1; fix: e.g. 500")
        if self.every_seconds is not None and not self.every_seconds > 0:
            raise ValueError(f"every_seconds: {self.every_seconds!r} must be > 0; fix: e.g. 900")
        if self.probe_steps < 1:
            raise ValueError(f"probe_steps: {self.probe_steps!r} must be >= 1")

    def start(self, step: int) -> None:
        """Training (re)starts after ``step`` (0 on a fresh start)."""
        if self.every_steps is not None:
            self._next_save = (step // self.every_steps + 1) * self.every_steps
        else:
            self._next_save, self._next_timing = None, step + self.probe_steps

    def due(self, step: int) -> bool:
        """Save at ``step`` (the same answer on every rank)."""
        return self._next_save is not None and step >= self._next_save

    def needs_timing(self, step: int) -> bool:
        """Agree on the step time now: every rank asks at the same step (the probe, then each save)."""
        return self.every_seconds is not None and (
            step == self._next_timing or (self._next_save is not None and step >= self._next_save)
        )

    def replan(self, step: int, seconds_per_step: float) -> int:
        """After the agreed step time at ``step``: the next save step (and the next timing)."""
        if self.every_steps is not None:
            self._next_save = step + self.every_steps
            return self._next_save
        assert self.every_seconds is not None
        steps = steps_for(self.every_seconds, seconds_per_step)
        self._next_save = self._next_timing = step + steps
        return self._next_save

    def saved(self, step: int) -> None:
        """A save happened at ``step`` outside the plan (an early or a periodic one)."""
        if self.every_steps is not None:
            self._next_save = step + self.every_steps


def steps_for(interval_seconds: float, seconds_per_step: float) -> int:
    """Whole steps that fill ``interval_seconds`` (at least one)."""
    if seconds_per_step <= 0:
        return 1
    return max(1, math.floor(interval_seconds / seconds_per_step))


#: The job's checkpoint store URL: ``spotgpu drill local`` exports it on every simulated VM.
CHECKPOINT_URL_ENV = "SPOTGPU_CHECKPOINT_URL"


def checkpoint_url() -> str:
    """The job's checkpoint store URL from ``$SPOTGPU_CHECKPOINT_URL`` (one line naming it when unset).

    ``spotgpu drill local`` sets it to the drill's store on every simulated VM; on a pool VM, set it
    in the job's environment (or pass the URL to the callback yourself).
    """
    import os

    url = os.environ.get(CHECKPOINT_URL_ENV, "").strip()
    if not url:
        raise ValueError(f"{CHECKPOINT_URL_ENV}: not set; fix: export {CHECKPOINT_URL_ENV}=s3://BUCKET/JOB (the pool's "
                         "checkpoint store and a prefix for this job), or run under `spotgpu drill local`, which sets it")  # fmt: skip
    return url


def pool_interval_seconds(path: str | None = None) -> int:
    """The pool's periodic checkpoint interval, as this VM's agent config holds it.

    The components compute it from the workload profile
    (``spotgpu.economics.interval.choose_interval(profile, notice).seconds``) and the bootstrap
    writes it to ``/etc/spotgpu/agent.json`` as ``checkpointIntervalSeconds``; reading it here
    keeps one number for the cost model, the policy pack and the training job.
    """
    import os

    from pydantic import ValidationError

    from spotgpu.agent.config import AgentConfig

    where = path or os.environ.get(AGENT_CONFIG_ENV) or AGENT_CONFIG_PATH
    try:
        with open(where, encoding="utf-8") as handle:
            return AgentConfig.model_validate_json(handle.read()).checkpoint_interval_seconds
    except OSError as err:
        raise ValueError(
            f"{where}: cannot read the agent config ({err.strerror}); fix: run on a pool VM, set "
            f"{AGENT_CONFIG_ENV}, or pass every_seconds=/every_steps= yourself"
        ) from None
    except ValidationError as err:
        first = err.errors()[0]
        field_name = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise ValueError(f"{where}: {field_name}: {first['msg']}; fix: the file the bootstrap wrote") from None
