"""Interruption rate and reacquisition latency, fitted from traces.

A profile's ``interruptionsPerHour`` and ``expectedReacquisitionSeconds`` should
be measured, not guessed. Two sources feed them:

* availability traces (``spotgpu.traces``): runs of availability are spot run
  lengths (interruptions per available hour, and their hazard); gaps that follow
  a loss are reacquisition latencies, either in the same zone or, for a pool that
  may move zones, until *any* of its zones has capacity again;
* telemetry records from the agent and controller (``spotgpu.economics.telemetry``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spotgpu.economics.hazard import Empirical, Runs, Weibull, fit_weibull, kaplan_meier, pooled_runs, runs_of
from spotgpu.traces import Trace


def availability(trace: Trace, nodes: int = 1) -> np.ndarray:
    """Whether a gang of ``nodes`` could be held at each tick (the trace counts holdable instances)."""
    if nodes < 1:
        raise ValueError(f"nodes {nodes!r} must be at least 1")
    return np.asarray(trace.data) >= nodes


def _check_group(traces: Sequence[Trace]) -> None:
    """One trace per zone and one tick length: a folder mixing instance types is not extra zones."""
    if not traces:
        raise ValueError("no traces given; load a group with spotgpu.traces.load_group")
    gaps = {t.gap_seconds for t in traces}
    if len(gaps) != 1:
        raise ValueError(f"traces mix tick lengths {sorted(gaps)}; replay one group at a time")
    by_zone: dict[str, list[str]] = {}
    for t in traces:
        by_zone.setdefault(t.zone, []).append(t.name)
    twice = {z: names for z, names in by_zone.items() if len(names) > 1}
    if twice:
        zone, names = sorted(twice.items())[0]
        raise ValueError(
            f"{traces[0].group}: zone {zone} has {len(names)} traces ({', '.join(sorted(names))}), i.e. several "
            "instance types in one zone; they are not extra zones. Split the folder by instance type "
            "(one folder per type) or pass the traces of one type"
        )


def aligned_availability(traces: Sequence[Trace], nodes: int = 1) -> np.ndarray:
    """(zones, ticks) availability, cut to the shortest trace; all traces must share a tick."""
    _check_group(traces)
    n = min(len(t.data) for t in traces)
    return np.stack([availability(t, nodes)[:n] for t in traces])


def aligned_counts(traces: Sequence[Trace]) -> np.ndarray:
    """(zones, ticks) instances holdable per zone, cut to the shortest trace (what the twin's groups hold)."""
    _check_group(traces)
    n = min(len(t.data) for t in traces)
    return np.stack([np.asarray(t.data[:n], dtype=np.int64) for t in traces])


def any_zone_gaps(avail: np.ndarray, home: int, gap_seconds: float) -> Runs:
    """Latency from each loss in zone ``home`` until any zone has capacity again.

    A loss at tick i (home available at i-1, not at i) waits until the first
    tick >= i where some zone is available; a wait that reaches the end is censored.
    """
    any_up = avail.any(axis=0)
    n = any_up.size
    idx = np.where(any_up, np.arange(n), n)
    next_up = np.minimum.accumulate(idx[::-1])[::-1]  # first available tick at or after i
    h = avail[home]
    losses = np.flatnonzero(h[:-1] & ~h[1:]) + 1
    wait = next_up[losses]
    censored = wait >= n
    lengths = (np.minimum(wait, n) - losses).astype(float) * gap_seconds
    return Runs(lengths, censored)


@dataclass(frozen=True)
class TraceEstimate:
    """What a group of traces says about one pool's exposure."""

    zones: tuple[str, ...]
    gap_seconds: int
    interruptions_per_hour: float  # interruptions per available (held) hour, pooled over zones
    run_model: Weibull  # spot run lengths, parametric (its shape says how far from memoryless)
    run_survival: Empirical  # spot run lengths, Kaplan-Meier: what the interval is chosen against
    same_zone_latency: Runs  # gaps after a loss, same zone
    any_zone_latency: Runs  # gaps after a loss until any zone is up
    mean_availability: dict[str, float]
    losses: int = 0  # uncensored runs: the losses behind interruptions_per_hour
    held_hours: float = 0.0  # the held (available) hours it is per

    @property
    def expected_reacquisition_seconds(self) -> float:
        """Mean wait until capacity in any zone (what a zone-diversified pool sees)."""
        lat = self.any_zone_latency.lengths
        return float(lat.mean()) if lat.size else 0.0

    @property
    def same_zone_reacquisition_seconds(self) -> float:
        lat = self.same_zone_latency.lengths
        return float(lat.mean()) if lat.size else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "zones": list(self.zones),
            "gapSeconds": self.gap_seconds,
            "interruptionsPerHour": round(self.interruptions_per_hour, 4),
            "runLengthModel": self.run_model.describe(),
            "runLengthSurvival": self.run_survival.describe(),
            "meanRunHours": round(self.run_model.mean_seconds / 3600, 3),
            "expectedReacquisitionSeconds": round(self.expected_reacquisition_seconds, 1),
            "sameZoneReacquisitionSeconds": round(self.same_zone_reacquisition_seconds, 1),
            "meanAvailability": {k: round(v, 3) for k, v in self.mean_availability.items()},
        }


def estimate_from_traces(traces: Sequence[Trace], nodes: int = 1) -> TraceEstimate:
    """Pooled interruption rate, Weibull run lengths and latencies across a group's zones."""
    avail = aligned_availability(traces, nodes)
    gap = traces[0].gap_seconds
    runs = pooled_runs(list(avail), True, gap)
    held_hours = float(avail.sum()) * gap / 3600.0
    losses = int((~runs.censored).sum())
    if held_hours <= 0:
        raise ValueError(f"no capacity for {nodes} node(s) in any trace; nothing to estimate")
    same = pooled_runs(list(avail), False, gap, skip_leading=True)
    anyz = [any_zone_gaps(avail, z, gap) for z in range(len(traces))]
    any_runs = Runs(
        np.concatenate([r.lengths for r in anyz]) if anyz else np.zeros(0),
        np.concatenate([r.censored for r in anyz]) if anyz else np.zeros(0, dtype=bool),
    )
    return TraceEstimate(
        zones=tuple(t.zone for t in traces),
        gap_seconds=gap,
        interruptions_per_hour=losses / held_hours,
        run_model=fit_weibull(runs),
        run_survival=kaplan_meier(runs),
        same_zone_latency=same,
        any_zone_latency=any_runs,
        mean_availability={t.zone: float(a.mean()) for t, a in zip(traces, avail, strict=True)},
        losses=losses,
        held_hours=held_hours,
    )


_PROBE = re.compile(r"^(\d+)-node$")


def probe_size(trace: Trace) -> int:
    """How many instances the trace's collector asked for: its ``<n>-node`` group folder (the shipped
    layout), else the most the trace ever held (at least 1)."""
    m = _PROBE.match(trace.group.split("/")[0])
    if m:
        return int(m.group(1))
    return max(1, int(np.asarray(trace.data).max())) if len(trace.data) else 1


def gang_traces(traces: Sequence[Trace], nodes: int) -> list[Trace]:
    """The traces a gang of ``nodes`` is replayed and fitted on.

    A trace whose collector probed at least ``nodes`` instances is used as it is. One that probed fewer
    (the 1-node traces probed one) cannot say whether a zone held more; it is read as "a zone that held
    the whole probe holds the gang": each such tick holds ``nodes``. An assumption, printed wherever it
    is made; the 16-node traces, which count up to 16, hold all of their probe or none far more often
    than part of it (a zone's capacity comes and goes at once), which is what makes it a fair one.
    """
    out = []
    for t in traces:
        probe = probe_size(t)
        if nodes <= probe:
            out.append(t)
            continue
        data = np.where(np.asarray(t.data) >= probe, nodes, np.asarray(t.data)).astype(np.int16)
        out.append(Trace(t.name, t.zone, t.group, t.gap_seconds, data))
    return out


def zone_estimate(trace: Trace, nodes: int = 1) -> tuple[float, Runs, Runs]:
    """(interruptions per held hour, run lengths, gaps after losses) for one zone."""
    a = availability(trace, nodes)
    runs = runs_of(a, True, trace.gap_seconds)
    held_hours = float(a.sum()) * trace.gap_seconds / 3600.0
    rate = float((~runs.censored).sum()) / held_hours if held_hours > 0 else float("inf")
    return rate, runs, runs_of(a, False, trace.gap_seconds, skip_leading=True)
