"""The two intervals of a tiered checkpoint, and where restores come from.

With ``checkpointTiers`` a periodic save blocks training for the write to the node's local
tier (``C_l``, every ``T_l``: the local interval), commits locally once its peer copies are
verified (``K_l`` after it started), and every ``k``-th one is uploaded to the object store
in the background (``C_s``: ``checkpointWriteSeconds``, every ``T_d = k T_l``: the durable
interval). After an interruption the gang restores the newest step *every* rank can get:
the newest local generation when each lost node's shard still has a copy on a surviving
peer, else the newest durable one (which every node's tier keeps beside its ``keep`` newest,
so survivors read it locally). So with ``q`` = P(an interruption takes some node's shard with
every copy of it: the gang falls back to the durable step):

* lost work per interruption: ``(1 - q) (T_l/2 + K_l) + q (T_d/2 + K_l + C_s)``;
* the gang's load: ``(1 - q) load_tier + q checkpointLoadSeconds``;
* ``T_l`` is Young/Daly on ``C_l`` and the gang's MTBI (``spotgpu.economics.interval``);
  ``T_d`` is Daly on ``C_s`` and the MTBI of *store restores* (``MTBI / q``), capped so the
  expected loss stays under ``maxLostWorkSeconds``, and never shorter than one upload;
* the restore mix: survivors read their own tier, each lost node's replacement a peer, or the
  store when the interruption falls back (:func:`restore_mix`).

``q`` and the share of the gang an interruption takes come from availability traces
(:func:`gang_loss_from_traces`), counting every node of the gang that goes: the traces give each
zone's capacity per tick, which mostly comes and goes at once (16 nodes to 0), and a gang sits where
the pool put it and replaced its lost nodes, often all in the one zone with room; a reclaim there
takes the whole gang and every copy with it. One node lost per interruption (local ``(N-1)/N``)
was the old, optimistic assumption: on the shipped traces a 2-node gang spread over three zones
loses both nodes in three interruptions of four.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from spotgpu.economics.interval import MAX_INTERVAL_SECONDS, daly_interval
from spotgpu.models.tiers import CheckpointTiers, tier_commit_seconds, tier_load_seconds, tier_write_seconds
from spotgpu.models.workload import WorkloadProfile
from spotgpu.traces import Trace

#: The shipped multi-node traces the default joint-loss figures are fitted from.
JOINT_LOSS_TRACES = "16-node/aws-08-27-2023"


@dataclass(frozen=True)
class JointLoss:
    """What one interruption takes from a gang of ``nodes``, and where the figures come from.

    ``probability`` (``q``): P(some lost node's shard went with every node holding a copy of it), so the gang
    resumes from the newest durable step; ``lost_share``: the expected share of the gang's nodes lost (their
    replacements read a peer or the store; the survivors read their own tier); ``store_share``: the expected
    share lost in an interruption that falls back (those replacements read the store).
    """

    probability: float
    peer_copies: int
    across_zones: bool
    node_losses: int  # lost nodes the figures count (0: not from traces)
    source: str
    nodes: int
    lost_share: float
    store_share: float

    def __post_init__(self) -> None:
        eps = 1e-9
        if not (
            self.nodes >= 1
            and 0.0 <= self.probability <= 1.0 + eps
            and 0.0 <= self.store_share <= min(self.lost_share, self.probability) + eps
            and self.lost_share <= 1.0 + eps
        ):
            raise ValueError(f"JointLoss: q {self.probability}, lost share {self.lost_share}, store share "
                             f"{self.store_share} of {self.nodes} node(s): need 0 <= store <= min(lost, q), lost <= 1")  # fmt: skip

    def describe(self) -> str:
        where = "peers across zones" if self.across_zones else "peers in the gang's zone"
        return f"{self.probability:.1%} of interruptions ({where}; {self.source})"


def _walk(counts: Sequence[Sequence[int]], names: Sequence[str], order: Sequence[int], nodes: int,
          copies: int) -> tuple[list[tuple[int, bool]], bool]:  # fmt: skip
    """One pass of a gang of ``nodes`` over the traces, launched in the zones ``order`` allows (the first wins
    ties): each interruption's (nodes of the whole gang lost until it is whole again, whether it falls back),
    and whether the gang was ever whole."""
    from spotgpu.economics.placement import holders, spread

    zones = [names[z] for z in order]
    gang: list[tuple[str, str]] = []  # (node, zone), in launch order
    ring: dict[str, set[str]] | None = None  # node -> the nodes holding its shard, as the whole gang formed
    lost: set[str] = set()
    out: list[tuple[int, bool]] = []
    launched = 0
    for i in range(len(counts[0])):
        for z in order:  # a zone over its capacity takes the difference, newest first (as the twin's cloud)
            mine = [g for g in gang if g[1] == names[z]]
            over = len(mine) - counts[z][i]
            for g in mine[len(mine) - over :] if over > 0 else ():
                gang.remove(g)
                if ring is not None and g[0] in ring:
                    lost.add(g[0])
        if len(gang) < nodes:  # replacements launch at once where there is room, as the pool's group does
            held = Counter(zone for _, zone in gang)
            room = {names[z]: counts[z][i] - held[names[z]] for z in order}
            for zone in spread(nodes - len(gang), zones, room, held):
                launched += 1
                gang.append((f"{launched:08d}", zone))
            if len(gang) == nodes:
                if lost and ring is not None:
                    out.append(_outcome(ring, lost))
                lost = set()
                ring = holders(gang, copies)
    if lost and ring is not None:  # the traces end before the gang is whole again
        out.append(_outcome(ring, lost))
    return out, ring is not None


def _outcome(ring: dict[str, set[str]], lost: set[str]) -> tuple[int, bool]:
    """(nodes lost, whether some lost node's shard went with every node holding it)."""
    return len(lost), any(ring[node] <= lost for node in lost)


def gang_loss_from_traces(traces: Sequence[Trace], nodes: int, peer_copies: int, across_zones: bool) -> JointLoss:
    """What an interruption takes from a gang of ``nodes`` on multi-node availability traces (``data[i]``:
    the instances a zone can hold in tick ``i``), the gang placed as the pool places it.

    The gang walks the traces once per home zone. Across zones (``across_zones`` and two traces or more)
    its nodes launch where there is room, the zone holding the fewest of them first, the home first on ties
    (:func:`~spotgpu.economics.placement.spread`); else in its home zone only. A zone whose capacity falls
    below what the gang holds there takes the difference, newest first (as the twin's cloud does), and the
    replacements launch at once where there is room (nothing moves the survivors). An interruption is a
    tick that takes a node of the whole gang; it counts every node of that gang lost until the gang is
    whole again (a survivor reclaimed while its partner's replacement waits for room goes with it), and it
    falls back to the durable step when a lost node's shard went with every node holding a copy (its
    partners on the library's ring, chosen as the gang formed: :func:`~spotgpu.economics.placement.holders`).

    ``q`` is the share of interruptions that fall back; the shares are averages of ``lost / nodes`` over
    them (``store_share`` over those that fall back). One node has no peer (every restore is the store's);
    no peer copies (``peer_copies`` 0) make every interruption fall back. Traces that never lose the gang
    give ``q = 0`` and one node per interruption; traces that never hold it say nothing, and every restore
    is taken to need the store.
    """
    n = max(1, nodes)
    copies = max(0, min(peer_copies, n - 1))
    if n == 1:
        return JointLoss(1.0, 0, across_zones, 0, "one node: its shard is only in the store", 1, 1.0, 1.0)
    if not traces:
        raise ValueError("no traces: give multi-node availability traces (e.g. 16-node/aws-08-27-2023)")
    length = min(len(t.data) for t in traces)
    counts = [[int(x) for x in t.data[:length]] for t in traces]
    names = [t.zone for t in traces]
    spread_out = across_zones and len(traces) >= 2
    outcomes: list[tuple[int, bool]] = []
    formed = False
    for home in range(len(traces)):
        order = [home, *(z for z in range(len(traces)) if z != home)] if spread_out else [home]
        found, whole = _walk(counts, names, order, n, copies)
        outcomes += found
        formed = formed or whole
    where = f"{traces[0].group} ({', '.join(names)}), {traces[0].gap_seconds} s ticks"
    if not formed:
        return JointLoss(1.0, copies, across_zones, 0, f"the traces never hold a gang of {n} ({where}): every "
                         "restore taken to need the store", n, 1.0, 1.0)  # fmt: skip
    if not outcomes:
        return JointLoss(0.0, copies, across_zones, 0, f"the traces show no loss of a gang of {n} ({where}): one "
                         "node per interruption assumed", n, 1.0 / n, 0.0)  # fmt: skip
    events = len(outcomes)
    lost = sum(k for k, _ in outcomes)
    fell_back = [k for k, back in outcomes if back]
    return JointLoss(len(fell_back) / events, copies, across_zones, lost,
                     f"{events} interruptions of a {n}-node gang, {lost} nodes lost, on {where}", n,
                     lost / (events * n), sum(fell_back) / (events * n))  # fmt: skip


@cache
def default_joint_loss(nodes: int, peer_copies: int, across_zones: bool) -> JointLoss:
    """The figures for a gang of ``nodes`` from the traces shipped with spotgpu (:data:`JOINT_LOSS_TRACES`, or
    ``$SPOTGPU_TRACES``)."""
    from spotgpu.traces import load_group

    if nodes <= 1:  # no traces needed (nor read)
        return gang_loss_from_traces([], nodes, peer_copies, across_zones)
    return gang_loss_from_traces(load_group(JOINT_LOSS_TRACES), nodes, peer_copies, across_zones)


def pool_joint_loss(workload: WorkloadProfile, zones: int) -> JointLoss | None:
    """The figures for a pool of ``zones`` zones: the gang spread over them with partners across them when it
    spans two or more, else in its zone; None for a workload without ``checkpointTiers``."""
    tiers = workload.checkpoint_tiers
    if tiers is None:
        return None
    return default_joint_loss(workload.nodes, tiers.peers(workload.nodes), zones >= 2)


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


def restore_mix(loss: JointLoss) -> RestoreMix:
    """Where each rank's state comes from after an interruption, on average: the survivors read their own
    tier (it keeps the newest durable generation too, so a fall back to the durable step is read locally
    as well), each lost node's replacement a peer's copy, or the store when the interruption falls back."""
    store = loss.store_share
    return RestoreMix(1.0 - loss.lost_share, max(0.0, loss.lost_share - store), store)


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
    if joint_loss.nodes != n:
        raise ValueError(f"the joint-loss figures are for a gang of {joint_loss.nodes}, the workload has {n} nodes; "
                         "fix: pool_joint_loss(workload, zones) or default_joint_loss(nodes, ...) for its own gang")  # fmt: skip
    q = joint_loss.probability
    t_l = float(local_seconds)
    reasons = [f"local saves every {local_seconds} s (blocking {c_l:.3g} s: {write_source}; committed with its "
               f"peer copies after {k_l:.3g} s: {commit_source})",
               f"P(an interruption falls back to the store) {joint_loss.describe()}"]  # fmt: skip
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
    mix = restore_mix(joint_loss)
    decision = TierDecision(
        local_seconds=local_seconds, durable_seconds=k * local_seconds, durable_every=k, write_seconds=c_l,
        write_source=write_source, commit_seconds=k_l, commit_source=commit_source, load_seconds=load_l, load_source=load_source, store_write_seconds=c_s,
        store_load_seconds=profile.checkpoint_load_seconds, keep=tiers.local.keep, peer_copies=tiers.peers(n),
        joint_loss=joint_loss, mix=mix, method=method, reasons=(),
    )  # fmt: skip
    reasons.append(f"durable every {k} local save(s) = {k * local_seconds} s; expected loss per interruption "
                   f"{decision.lost_seconds():.0f} s; restores: {mix.describe()}")  # fmt: skip
    return TierDecision(**{**decision.__dict__, "reasons": tuple(reasons)})
