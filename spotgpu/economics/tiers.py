"""The two intervals of a tiered checkpoint, and where restores come from.

With ``checkpointTiers`` a periodic save blocks training for the write to the node's local
tier (``C_l``, every ``T_l``: the local interval), commits locally once its peer copies are
verified (``K_l`` after it started), and every ``k``-th one is uploaded to the object store
in the background (``C_s``: ``checkpointWriteSeconds``, every ``T_d = k T_l``: the durable
interval). After an interruption the gang restores the newest step *every* rank can get:
the newest local generation when each lost node's shard still has a copy on a surviving
peer, else the newest durable one (which every node's tier keeps beside its ``keep`` newest,
so survivors read it locally). So with ``q`` = P(a lost node's peers are lost with it):

* lost work per interruption: ``(1 - q) (T_l/2 + K_l) + q (T_d/2 + K_l + C_s)``;
* the gang's load: ``(1 - q) load_tier + q checkpointLoadSeconds``;
* ``T_l`` is Young/Daly on ``C_l`` and the gang's MTBI (``spotgpu.economics.interval``);
  ``T_d`` is Daly on ``C_s`` and the MTBI of *store restores* (``MTBI / q``), capped so the
  expected loss stays under ``maxLostWorkSeconds``, and never shorter than one upload.

``q`` comes from availability traces (:func:`joint_loss_from_traces`): how often the nodes
holding a shard's copies go in the same tick as the node itself, within one zone (16-node
traces: several nodes of a zone are usually reclaimed together) or across zones (the
traces of different zones at the same tick) when the pool spans zones and partners are
chosen across them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from spotgpu.economics.interval import MAX_INTERVAL_SECONDS, daly_interval
from spotgpu.models.tiers import CheckpointTiers, tier_commit_seconds, tier_load_seconds, tier_write_seconds
from spotgpu.models.workload import WorkloadProfile
from spotgpu.traces import Trace

#: The shipped multi-node traces the default joint-loss figure is fitted from.
JOINT_LOSS_TRACES = "16-node/aws-08-27-2023"


@dataclass(frozen=True)
class JointLoss:
    """P(every node holding a lost node's copies is lost in the same tick), and where it comes from."""

    probability: float
    peer_copies: int
    across_zones: bool
    node_losses: int  # lost nodes the figure averages over (0: not from traces)
    source: str

    def describe(self) -> str:
        where = "peers across zones" if self.across_zones else "peers in the node's zone"
        return f"{self.probability:.1%} ({where}; {self.source})"


def _mates_lost(held: int, lost: int, copies: int) -> float:
    """P(all ``copies`` zone-mates holding a lost node's copies went too), ``lost`` of ``held`` nodes lost."""
    others = held - 1
    # too few nodes left to hold the copies: nothing survives
    return 1.0 if others < copies else math.comb(lost - 1, copies) / math.comb(others, copies)


def _same_zone(counts: np.ndarray, copies: int) -> tuple[float, float]:
    """(sum over lost nodes of P(all ``copies`` zone-mates holding its copies went too), lost nodes)."""
    hit = total = 0.0
    for i in np.flatnonzero(counts[1:] < counts[:-1]):
        held, lost = int(counts[i]), int(counts[i] - counts[i + 1])
        hit += lost * _mates_lost(held, lost, copies)
        total += lost
    return hit, total


def _across_zones(counts: np.ndarray, zone: int, copies: int) -> tuple[float, float]:
    """Like :func:`_same_zone` for ``zone``'s lost nodes, partners across zones: its copies sit in the
    other zones that hold nodes in that tick, in turn, each lost with the share of its zone's nodes
    lost. When no other zone holds any (the gang could only get room in this one), the partners are
    zone-mates: counting them as safe in an empty zone put q at 4 % where the replay lost both in 60 %."""
    hit = total = 0.0
    row = counts[zone]
    for i in np.flatnonzero(row[1:] < row[:-1]):
        held, lost = int(row[i]), int(row[i] - row[i + 1])
        homes = [w for w in range(counts.shape[0]) if w != zone and counts[w, i] > 0]
        if not homes:
            p = _mates_lost(held, lost, copies)
        else:
            p = 1.0
            for c in range(copies):  # a second copy in the same zone: approximated alike
                w = homes[c % len(homes)]
                p *= max(int(counts[w, i] - counts[w, i + 1]), 0) / int(counts[w, i])
        hit += lost * p
        total += lost
    return hit, total


def joint_loss_from_traces(traces: Sequence[Trace], peer_copies: int, across_zones: bool) -> JointLoss:
    """``q`` from multi-node availability traces (``data[i]`` = nodes held in tick ``i``).

    Same zone: for a drop of ``k`` of ``h`` nodes, a given lost node's ``c`` copies (on ``c``
    of the other ``h - 1``) are all lost with probability ``C(k-1, c) / C(h-1, c)``.
    Across zones: its copies sit in the other zones that hold nodes in that tick, in turn (a zone's
    next copy on another of its nodes), each lost with the share of its zone's nodes lost in that
    tick; in a tick where no other zone holds any, its zone-mates hold them (same-zone odds).
    Averaged over every lost node of every zone; no copies (``peer_copies`` 0) is ``q = 1``.
    """
    if peer_copies <= 0:
        return JointLoss(1.0, 0, across_zones, 0, "no peer copies: a lost node's shard is only in the store")
    if not traces:
        raise ValueError("no traces: give multi-node availability traces (e.g. 16-node/aws-08-27-2023)")
    n = min(len(t.data) for t in traces)
    counts = np.stack([np.asarray(t.data[:n], dtype=np.int64) for t in traces])
    hit = total = 0.0
    zones = counts.shape[0]
    for z in range(zones):
        h, t = _same_zone(counts[z], peer_copies) if not across_zones or zones < 2 else _across_zones(counts, z, peer_copies)
        hit, total = hit + h, total + t
    if total == 0:
        return JointLoss(0.0, peer_copies, across_zones, 0, "the traces show no loss")
    zones_seen = ", ".join(t.zone for t in traces)
    return JointLoss(float(hit / total), peer_copies, across_zones, int(total),
                     f"{int(total)} node losses in {traces[0].group} ({zones_seen}), same {traces[0].gap_seconds} s "
                     "tick")  # fmt: skip


@cache
def default_joint_loss(peer_copies: int, across_zones: bool) -> JointLoss:
    """``q`` from the traces shipped with spotgpu (:data:`JOINT_LOSS_TRACES`, or ``$SPOTGPU_TRACES``)."""
    from spotgpu.traces import load_group

    return joint_loss_from_traces(load_group(JOINT_LOSS_TRACES), peer_copies, across_zones)


def pool_joint_loss(workload: WorkloadProfile, zones: int) -> JointLoss | None:
    """``q`` for a pool of ``zones`` zones: partners across zones when it spans two or more, else
    within its zone; None for a workload without ``checkpointTiers``."""
    tiers = workload.checkpoint_tiers
    return None if tiers is None else default_joint_loss(tiers.peers(workload.nodes), zones >= 2)


@dataclass(frozen=True)
class RestoreMix:
    """Expected share of rank restores per interruption from each source (sums to 1)."""

    local: float
    peer: float
    store: float

    def as_dict(self) -> dict[str, float]:
        return {"local": round(self.local, 4), "peer": round(self.peer, 4), "store": round(self.store, 4)}

    def describe(self) -> str:
        return f"local {self.local:.0%}, peer {self.peer:.0%}, store {self.store:.0%}"


def restore_mix(nodes: int, q: float) -> RestoreMix:
    """Where each rank's state comes from after one node is lost (first order: one node per interruption).

    The lost node's replacement pulls its shard from a peer (``1 - q``) or the store (``q``); the
    ``N - 1`` survivors read their own tier (it keeps the newest durable generation too, so a fall
    back to the durable step is read locally as well).
    """
    n = max(1, nodes)
    local = (n - 1) / n
    peer = (1.0 - q) / n
    return RestoreMix(local, peer, max(0.0, 1.0 - local - peer))


@dataclass(frozen=True)
class TierDecision:
    """The local and durable intervals of a tiered workload, and what they rest on."""

    local_seconds: int
    durable_seconds: int
    durable_every: int
    write_seconds: float  # C_l: training blocked per local save
    write_source: str
    commit_seconds: float  # K_l: a save's start to its local commit with verified peer copies
    commit_source: str
    load_seconds: float  # the tier's restore
    load_source: str
    store_write_seconds: float  # C_s
    store_load_seconds: float
    keep: int
    peer_copies: int
    joint_loss: JointLoss
    mix: RestoreMix
    method: str
    reasons: tuple[str, ...]

    @property
    def q(self) -> float:
        return self.joint_loss.probability

    def lost_seconds(self) -> float:
        """Expected work lost per interruption (no notice credit)."""
        q = self.q
        return (1.0 - q) * (self.local_seconds / 2.0 + self.commit_seconds) + q * (
            self.durable_seconds / 2.0 + self.commit_seconds + self.store_write_seconds
        )

    def load(self) -> float:
        """Expected seconds the gang spends loading after an interruption."""
        return (1.0 - self.q) * self.load_seconds + self.q * self.store_load_seconds

    def as_dict(self) -> dict[str, object]:
        return {
            "localIntervalSeconds": self.local_seconds,
            "durableIntervalSeconds": self.durable_seconds,
            "durableEvery": self.durable_every,
            "localWriteSeconds": round(self.write_seconds, 3),
            "localWriteSource": self.write_source,
            "localCommitSeconds": round(self.commit_seconds, 3),
            "localCommitSource": self.commit_source,
            "tierLoadSeconds": round(self.load_seconds, 3),
            "tierLoadSource": self.load_source,
            "keep": self.keep,
            "peerCopies": self.peer_copies,
            "jointLossProbability": round(self.q, 4),
            "jointLossSource": self.joint_loss.describe(),
            "expectedLostSecondsPerInterruption": round(self.lost_seconds(), 1),
            "restoreMix": self.mix.as_dict(),
            "method": self.method,
            "reasons": list(self.reasons),
        }


def choose_durable(
    profile: WorkloadProfile,
    tiers: CheckpointTiers,
    local_seconds: int,
    mtbi_seconds: float,
    joint_loss: JointLoss,
) -> TierDecision:
    """The durable interval for the local interval ``local_seconds`` and the gang's MTBI."""
    b, n = profile.checkpoint_bytes, profile.nodes
    c_l, write_source = tier_write_seconds(tiers, b, n)
    k_l, commit_source = tier_commit_seconds(tiers, b, n)
    load_l, load_source = tier_load_seconds(tiers, b, n)
    c_s, bound_s = profile.checkpoint_write_seconds, profile.max_lost_work_seconds
    q = joint_loss.probability
    t_l = float(local_seconds)
    reasons = [f"local saves every {local_seconds} s (blocking {c_l:.3g} s: {write_source}; committed with its "
               f"peer copies after {k_l:.3g} s: {commit_source})",
               f"P(a lost node's copies are lost with it) {joint_loss.describe()}"]  # fmt: skip
    k_min = max(1, math.ceil(c_s / t_l - 1e-9))  # an upload must finish before the next one starts
    if isinstance(tiers.durable_interval_seconds, int):
        k = max(k_min, math.ceil(tiers.durable_interval_seconds / t_l - 1e-9))
        method = "configured"
        reasons.append(f"durableIntervalSeconds {tiers.durable_interval_seconds} as a whole number of local intervals")
    else:
        if q <= 0 or not math.isfinite(mtbi_seconds):
            raw, method = float(MAX_INTERVAL_SECONDS), "no-store-restores"
            reasons.append("no restore is expected to need the store: capped at the maximum interval")
        else:
            raw, method = daly_interval(c_s, mtbi_seconds / q), "daly"
            reasons.append(f"Daly optimum {raw:.0f} s for C_s={c_s:g} s and the MTBI of store restores "
                           f"{mtbi_seconds / q:.0f} s (MTBI / q)")  # fmt: skip
        k = max(1, round(raw / t_l))
        if q > 0:
            room = (bound_s - (1.0 - q) * (t_l / 2.0 + k_l)) / q - k_l - c_s
            k_bound = math.floor(2.0 * room / t_l + 1e-9) if room > 0 else 0
            if k > k_bound:
                k = k_bound
                method += "+loss-bound"
                reasons.append(f"capped so the expected loss stays under maxLostWorkSeconds {bound_s:g}")
        if k < k_min:
            reasons.append(f"raised to {k_min} local intervals: one upload takes {c_s:g} s")
            k = k_min
    mix = restore_mix(n, q)
    decision = TierDecision(
        local_seconds=local_seconds, durable_seconds=k * local_seconds, durable_every=k, write_seconds=c_l,
        write_source=write_source, commit_seconds=k_l, commit_source=commit_source, load_seconds=load_l, load_source=load_source, store_write_seconds=c_s,
        store_load_seconds=profile.checkpoint_load_seconds, keep=tiers.local.keep, peer_copies=tiers.peers(n),
        joint_loss=joint_loss, mix=mix, method=method, reasons=(),
    )  # fmt: skip
    reasons.append(f"durable every {k} local save(s) = {k * local_seconds} s; expected loss per interruption "
                   f"{decision.lost_seconds():.0f} s; restores: {mix.describe()}")  # fmt: skip
    return TierDecision(**{**decision.__dict__, "reasons": tuple(reasons)})
