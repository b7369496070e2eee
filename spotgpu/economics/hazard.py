"""Spot run-length distributions and the interval that minimises expected waste under them.

Young's and Daly's intervals assume interruptions are memoryless (exponential
run lengths). Measured spot capacity is not: the traces show many short runs
and a long tail of runs that last days (a Weibull shape well below 1, i.e. a
*decreasing* hazard). Under such a distribution the interval that minimises
waste differs from the memoryless one with the same mean, so the interval is
chosen numerically against the fitted survival function:

    each spot run of length X starts with R seconds of restart + reload, then
    commits T seconds of work per T + C seconds of wall time, so it keeps
    T * floor((X - R) / (T + C)) seconds of work, and
    E[floor(Y / s)] = sum_{k>=1} P(Y >= k s).

Maximising the expected kept work per run minimises the expected waste per run
(the run's length does not depend on T). Run lengths at the end of a trace are
right-censored (capacity had not been lost yet) and are fitted as such.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Runs:
    """Lengths (seconds) of runs of one value in a 0/1 series, with right-censoring flags."""

    lengths: np.ndarray  # float seconds
    censored: np.ndarray  # bool: the run touched the end of the series

    @property
    def observed(self) -> np.ndarray:
        return self.lengths[~self.censored]

    def __len__(self) -> int:
        return len(self.lengths)


def runs_of(available: np.ndarray, value: bool, gap_seconds: float, *, skip_leading: bool = False) -> Runs:
    """Runs of ``value`` in a boolean series; the last run is censored if it reaches the end.

    ``skip_leading`` drops a run that starts at index 0 (its start is unknown: left-censored),
    which matters for gaps: only a gap that follows a loss is a reacquisition latency.
    """
    a = np.asarray(available, dtype=bool)
    if a.size == 0:
        return Runs(np.zeros(0), np.zeros(0, dtype=bool))
    change = np.flatnonzero(a[1:] != a[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [a.size]))
    keep = a[starts] == value
    if skip_leading:
        keep &= starts > 0
    starts, ends = starts[keep], ends[keep]
    lengths = (ends - starts).astype(float) * gap_seconds
    censored = ends == a.size
    return Runs(lengths, censored)


class Survival(Protocol):
    """P(X >= x) for run lengths X, vectorised over seconds."""

    def survival(self, seconds: np.ndarray) -> np.ndarray: ...

    @property
    def mean_seconds(self) -> float: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Exponential:
    mean: float

    def survival(self, seconds: np.ndarray) -> np.ndarray:
        return np.exp(-np.maximum(seconds, 0.0) / self.mean)

    @property
    def mean_seconds(self) -> float:
        return self.mean

    def describe(self) -> str:
        return f"exponential(mean={self.mean:.0f} s)"


@dataclass(frozen=True)
class Weibull:
    """Weibull run lengths; ``shape < 1`` means a decreasing hazard (older runs last longer)."""

    shape: float
    scale: float  # seconds
    samples: int = 0

    def survival(self, seconds: np.ndarray) -> np.ndarray:
        x = np.maximum(np.asarray(seconds, dtype=float), 0.0)
        return np.exp(-((x / self.scale) ** self.shape))

    def hazard_per_hour(self, age_seconds: float) -> float:
        """Instantaneous interruption rate after a run has lasted ``age_seconds``."""
        age = max(age_seconds, 1.0)
        return self.shape / self.scale * (age / self.scale) ** (self.shape - 1.0) * 3600.0

    @property
    def mean_seconds(self) -> float:
        return self.scale * math.gamma(1.0 + 1.0 / self.shape)

    def describe(self) -> str:
        return f"weibull(shape={self.shape:.3f}, scale={self.scale:.0f} s, n={self.samples})"


@dataclass(frozen=True)
class Empirical:
    """Kaplan-Meier survival from censored runs: no shape assumed."""

    times: np.ndarray  # distinct observed event times, ascending
    surv: np.ndarray  # S(t) just after each event time

    def survival(self, seconds: np.ndarray) -> np.ndarray:
        x = np.asarray(seconds, dtype=float)
        # P(X >= x): survival just before x, i.e. after all events strictly below x.
        idx = np.searchsorted(self.times, x, side="left")
        padded = np.concatenate(([1.0], self.surv))
        return padded[idx]

    @property
    def mean_seconds(self) -> float:
        # Restricted mean up to the last event (the tail beyond it is unknown).
        edges = np.concatenate(([0.0], self.times))
        levels = np.concatenate(([1.0], self.surv))[:-1]
        return float(np.sum(np.diff(edges) * levels))

    def describe(self) -> str:
        return f"kaplan-meier({len(self.times)} event times)"


def fit_weibull(runs: Runs) -> Weibull:
    """Maximum-likelihood Weibull for right-censored run lengths.

    The scale has a closed form given the shape (``scale^k = sum x^k / r``), so the
    fit reduces to one monotone equation in the shape, solved by bisection.
    """
    x = np.asarray(runs.lengths, dtype=float)
    obs = ~np.asarray(runs.censored, dtype=bool)
    r = int(obs.sum())
    if r < 2 or np.any(x <= 0):
        raise ValueError(f"need at least 2 uncensored positive run lengths to fit a Weibull, got {r}")
    x = x / x.max()  # scale-free for numerical stability; rescaled below
    logx = np.log(x)
    mean_log_obs = float(logx[obs].mean())

    def score(k: float) -> float:
        xk = x**k
        return 1.0 / k + mean_log_obs - float(np.sum(xk * logx) / np.sum(xk))

    lo, hi = 0.01, 50.0
    if score(lo) < 0 or score(hi) > 0:
        raise ValueError("Weibull shape is outside [0.01, 50]; the runs do not look Weibull")
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if score(mid) > 0:
            lo = mid
        else:
            hi = mid
    k = math.sqrt(lo * hi)
    scale = (float(np.sum(x**k)) / r) ** (1.0 / k) * float(np.max(runs.lengths))
    return Weibull(shape=k, scale=scale, samples=len(x))


def kaplan_meier(runs: Runs) -> Empirical:
    x = np.asarray(runs.lengths, dtype=float)
    ev = ~np.asarray(runs.censored, dtype=bool)
    if not ev.any():
        raise ValueError("no uncensored runs: the survival curve is unknown")
    times = np.unique(x[ev])
    at_risk = np.array([(x >= t).sum() for t in times], dtype=float)
    events = np.array([((x == t) & ev).sum() for t in times], dtype=float)
    surv = np.cumprod(1.0 - events / at_risk)
    return Empirical(times=times, surv=surv)


def expected_kept_work(
    interval_seconds: np.ndarray | float,
    write_seconds: float,
    restart_seconds: float,
    model: Survival,
    horizon_seconds: float | None = None,
) -> np.ndarray:
    """Expected committed work (seconds) per spot run, for each candidate interval."""
    t = np.atleast_1d(np.asarray(interval_seconds, dtype=float))
    s = t + write_seconds
    horizon = horizon_seconds or 40.0 * max(model.mean_seconds, float(s.max()))
    k_max = int(min(200_000, math.ceil(horizon / float(s.min())) + 1))
    out = np.empty_like(t)
    for i, (ti, si) in enumerate(zip(t, s, strict=True)):
        n = min(k_max, math.ceil(horizon / float(si)) + 1)
        ks = np.arange(1, n + 1, dtype=float)
        out[i] = ti * float(np.sum(model.survival(restart_seconds + ks * si)))
    return out


def waste_fraction(interval_seconds: float, write_seconds: float, restart_seconds: float, model: Survival) -> float:
    """1 - kept work / run length: the share of spot time that produces nothing."""
    kept = float(expected_kept_work(interval_seconds, write_seconds, restart_seconds, model)[0])
    return 1.0 - kept / model.mean_seconds


def hazard_optimal_interval(
    write_seconds: float,
    restart_seconds: float,
    model: Survival,
    lo: float = 60.0,
    hi: float = 6 * 3600.0,
    points: int = 240,
) -> float:
    """The interval in [lo, hi] keeping the most work per run under ``model`` (log-spaced grid search)."""
    if write_seconds <= 0:
        raise ValueError(f"write_seconds {write_seconds!r} must be positive")
    grid = np.geomspace(lo, hi, points)
    kept = expected_kept_work(grid, write_seconds, restart_seconds, model)
    return float(grid[int(np.argmax(kept))])


def pooled_runs(series: Sequence[np.ndarray], value: bool, gap_seconds: float, **kw: bool) -> Runs:
    parts = [runs_of(a, value, gap_seconds, **kw) for a in series]
    if not parts:
        return Runs(np.zeros(0), np.zeros(0, dtype=bool))
    return Runs(np.concatenate([p.lengths for p in parts]), np.concatenate([p.censored for p in parts]))
