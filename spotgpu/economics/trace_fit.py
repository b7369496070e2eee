"""Interruption rates and reacquisition waits fitted from availability traces, per zone and type.

``spotgpu profile fit --traces DIR`` is the trace twin of the telemetry fit (:mod:`spotgpu.economics.fit`):
it reads a folder of availability traces (``spotgpu.traces``: ``<zone>_<type>_<n>.json``, one per zone),
and derives, per zone and type and pooled over the zones a pool may use,

* ``interruptionsPerHour``: losses per held node-hour (a run of availability that ends is one loss);
* ``gangInterruptionsPerHour`` (``--nodes N`` above 1): losses of a gang of N per held gang-hour. A trace
  collector that probed fewer instances than the gang (the 1-node traces probed one) says nothing about
  holding N; such a trace is read as "a zone that held the probe holds the gang"
  (:func:`spotgpu.economics.estimate.gang_traces`, said in the output), which the 16-node traces support:
  they hold all or none of the probe far more often than part of it;
* ``expectedReacquisitionSeconds``: the mean wait, after a loss, until the same zone holds the gang again
  (the wait where the pool's request stands: its primary group's zone, the same_pool rung); the wait
  until *any* of the zones does (what the alternate_zone rung can buy) is printed beside it.

Each figure carries its samples and the traces it came from, so a measured profile written with ``--out``
says where every figure came from (``sources``), as the preview and ``cost`` then print it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotgpu.economics.estimate import estimate_from_traces, gang_traces, probe_size, zone_estimate
from spotgpu.traces import Trace, load_trace

#: Fewer losses than this in a zone and its rate is flagged as resting on few events.
FEW_LOSSES = 5


@dataclass(frozen=True)
class ZoneFit:
    """One trace (a zone and type): its losses per held hour and its same-zone waits."""

    zone: str
    gpu_type: str
    group: str
    held_hours: float
    losses: int
    same_zone_waits: tuple[float, ...]
    availability: float

    @property
    def interruptions_per_hour(self) -> float | None:
        return self.losses / self.held_hours if self.held_hours > 0 else None

    def to_dict(self) -> dict[str, Any]:
        waits = self.same_zone_waits
        out: dict[str, Any] = {
            "zone": self.zone, "type": self.gpu_type, "group": self.group, "heldHours": round(self.held_hours, 2),
            "losses": self.losses,
            "interruptionsPerHour": None if self.interruptions_per_hour is None else round(self.interruptions_per_hour, 4),
            "sameZoneWaitSeconds": round(sum(waits) / len(waits), 1) if waits else None,
            "waitSamples": len(waits), "availability": round(self.availability, 4),
        }  # fmt: skip
        if self.losses < FEW_LOSSES:
            out["note"] = f"few losses ({self.losses}): the rate rests on few events"
        return out


@dataclass(frozen=True)
class TraceFit:
    """The fit of one trace group over the zones a pool may use, for a gang of ``nodes``."""

    group: str
    root: str
    zones: tuple[str, ...]
    nodes: int
    probe: int
    zone_fits: tuple[ZoneFit, ...]
    interruptions_per_hour: float
    losses: int
    held_hours: float
    gang_interruptions_per_hour: float | None
    gang_losses: int
    gang_held_hours: float
    same_zone_wait_seconds: float
    wait_samples: int
    any_zone_wait_seconds: float
    any_zone_samples: int

    @property
    def scaled(self) -> bool:
        """Whether the gang is larger than the collector's probe (the traces are read as holding it)."""
        return self.nodes > self.probe

    def where(self) -> str:
        folder = self.root if self.root.rstrip("/").endswith(self.group) else f"{self.group} under {self.root}"
        return f"{folder} ({', '.join(self.zones)})"

    def assumption(self) -> str | None:
        if not self.scaled:
            return None
        return (f"the {self.group} traces probed {self.probe} instance(s): a zone that held the probe is taken to hold "
                f"the gang of {self.nodes} (an assumption; the 16-node traces hold all of their probe or none far more "
                "often than part of it)")  # fmt: skip

    def profile_updates(self) -> tuple[dict[str, float], dict[str, str]]:
        """WorkloadProfile figures (camelCase) and, for each, the ``sources`` line a measured profile keeps."""
        how = f"fitted from traces: {self.where()}"
        updates: dict[str, float] = {"interruptionsPerHour": round(self.interruptions_per_hour, 4)}
        sources = {"interruptionsPerHour": f"{how}; {self.losses} losses in {self.held_hours:.1f} held node-hours"}
        if self.gang_interruptions_per_hour is not None:
            updates["gangInterruptionsPerHour"] = round(self.gang_interruptions_per_hour, 4)
            scaled = "; a zone that held the probe taken to hold the gang" if self.scaled else ""
            sources["gangInterruptionsPerHour"] = (f"{how}; {self.gang_losses} losses of a gang of {self.nodes} in "
                                                   f"{self.gang_held_hours:.1f} held gang-hours{scaled}")  # fmt: skip
        updates["expectedReacquisitionSeconds"] = round(self.same_zone_wait_seconds, 1)
        sources["expectedReacquisitionSeconds"] = (f"{how}; mean same-zone wait after a loss, {self.wait_samples} "
                                                   f"waits (any zone: {self.any_zone_wait_seconds:.0f} s)")  # fmt: skip
        return updates, sources

    def to_dict(self) -> dict[str, Any]:
        updates, sources = self.profile_updates()
        out: dict[str, Any] = {
            "group": self.group, "root": self.root, "zones": list(self.zones), "nodes": self.nodes, "probe": self.probe,
            "perZoneAndType": [z.to_dict() for z in self.zone_fits],
            "pooled": {
                "interruptionsPerHour": round(self.interruptions_per_hour, 4), "losses": self.losses,
                "heldNodeHours": round(self.held_hours, 2),
                "gangInterruptionsPerHour": None if self.gang_interruptions_per_hour is None
                else round(self.gang_interruptions_per_hour, 4),
                "gangLosses": self.gang_losses, "gangHeldHours": round(self.gang_held_hours, 2),
                "sameZoneWaitSeconds": round(self.same_zone_wait_seconds, 1), "waitSamples": self.wait_samples,
                "anyZoneWaitSeconds": round(self.any_zone_wait_seconds, 1), "anyZoneSamples": self.any_zone_samples,
            },
            "measuredProfile": updates,
            "sources": sources,
        }  # fmt: skip
        if self.scaled:
            out["assumption"] = self.assumption()
        return out


def read_trace_dir(path: str | Path) -> list[list[Trace]]:
    """The trace groups under ``path``: a folder of trace files is one group; a folder of such folders (or of
    ``<nodes>/<set>`` folders, as ``spotgpu/data/traces/availability``) is one group per folder that holds traces."""
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"--traces {path}: not a folder; fix: name a folder of <zone>_<type>_<n>.json traces "
                         "(e.g. spotgpu/data/traces/availability/1-node/aws-02-15-2023)")  # fmt: skip
    folders = sorted({f.parent for f in root.rglob("*.json")})
    if not folders:
        raise ValueError(f"--traces {path}: no .json traces under it; fix: name a folder of <zone>_<type>_<n>.json traces")
    return [[load_trace(f) for f in sorted(folder.glob("*.json"))] for folder in folders]


def fit_group(traces: Sequence[Trace], nodes: int = 1, zones: Sequence[str] | None = None, root: str = "") -> TraceFit:
    """The fit of one group over ``zones`` (default: all its zones), for a gang of ``nodes``."""
    if nodes < 1:
        raise ValueError(f"--nodes {nodes}: must be at least 1")
    chosen = list(traces)
    if zones:
        by_zone = {t.zone: t for t in traces}
        missing = [z for z in zones if z not in by_zone]
        if missing:
            raise ValueError(f"--zones {','.join(zones)}: {', '.join(missing)} not in {traces[0].group}; fix: use "
                             f"zones it holds: {', '.join(sorted(by_zone))}")  # fmt: skip
        chosen = [by_zone[z] for z in zones]
    per_node = estimate_from_traces(chosen, nodes=1)
    zone_fits = []
    for t in chosen:
        _, runs, gaps = zone_estimate(t)
        held = float((t.data >= 1).sum()) * t.gap_seconds / 3600.0
        zone_fits.append(ZoneFit(t.zone, _gpu_type(t), t.group, held, int((~runs.censored).sum()),
                                 tuple(float(x) for x in gaps.lengths), t.mean_availability()))  # fmt: skip
    gang_rate, gang_losses, gang_hours = None, 0, 0.0
    gang = gang_traces(chosen, nodes)
    at_size = estimate_from_traces(gang, nodes=nodes)
    if nodes > 1:
        gang_rate = at_size.interruptions_per_hour
        gang_losses = at_size.losses
        gang_hours = at_size.held_hours
    same, anyz = at_size.same_zone_latency.lengths, at_size.any_zone_latency.lengths
    return TraceFit(
        group=chosen[0].group, root=root, zones=tuple(t.zone for t in chosen), nodes=nodes, probe=probe_size(chosen[0]),
        zone_fits=tuple(zone_fits), interruptions_per_hour=per_node.interruptions_per_hour,
        losses=per_node.losses, held_hours=per_node.held_hours,
        gang_interruptions_per_hour=gang_rate, gang_losses=gang_losses, gang_held_hours=gang_hours,
        same_zone_wait_seconds=float(same.mean()) if same.size else 0.0, wait_samples=int(same.size),
        any_zone_wait_seconds=float(anyz.mean()) if anyz.size else 0.0, any_zone_samples=int(anyz.size),
    )  # fmt: skip


def _gpu_type(trace: Trace) -> str:
    """The type a trace file names (``us-east-1a_v100_1`` -> ``v100``)."""
    parts = trace.name.split("_")
    return parts[1] if len(parts) > 1 else "?"


def render_trace_fit(doc: dict[str, Any]) -> list[str]:
    """The fit as lines: per zone and type, then pooled, then the profile figures and where they came from."""
    out = [f"traces {doc['group']} ({doc['root']}), zones {', '.join(doc['zones'])}, gang of {doc['nodes']} "
           f"(the collector probed {doc['probe']})"]  # fmt: skip
    if "assumption" in doc:
        out.append(f"  - {doc['assumption']}")
    out.append(f"  {'zone':<14} {'type':<6} {'held h':>9} {'losses':>7} {'per h':>8} {'same-zone wait s':>17} "
               f"{'waits':>6} {'available':>9}")  # fmt: skip
    for z in doc["perZoneAndType"]:
        rate = "-" if z["interruptionsPerHour"] is None else f"{z['interruptionsPerHour']:.4g}"
        wait = "-" if z["sameZoneWaitSeconds"] is None else f"{z['sameZoneWaitSeconds']:.0f}"
        out.append(f"  {z['zone']:<14} {z['type']:<6} {z['heldHours']:>9.1f} {z['losses']:>7} {rate:>8} {wait:>17} "
                   f"{z['waitSamples']:>6} {z['availability']:>9.1%}" + (f"  - {z['note']}" if "note" in z else ""))  # fmt: skip
    p = doc["pooled"]
    out.append(f"  pooled: {p['interruptionsPerHour']:.4g} per held node-hour ({p['losses']} losses in "
               f"{p['heldNodeHours']:.1f} h)")  # fmt: skip
    if p["gangInterruptionsPerHour"] is not None:
        out.append(f"  gang of {doc['nodes']}: {p['gangInterruptionsPerHour']:.4g} per held gang-hour ({p['gangLosses']} "
                   f"losses in {p['gangHeldHours']:.1f} h)")  # fmt: skip
    out.append(f"  wait after a loss: same zone {p['sameZoneWaitSeconds']:.0f} s ({p['waitSamples']} waits), any zone "
               f"{p['anyZoneWaitSeconds']:.0f} s ({p['anyZoneSamples']})")  # fmt: skip
    out.append("  profile figures (paste into spotgpu:workloads, or --out a measured profile):")
    for key, value in doc["measuredProfile"].items():
        out.append(f"    {key}: {value:g}    # {doc['sources'][key]}")
    return out
