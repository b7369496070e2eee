"""The measured profile: what the fleet's telemetry says a workload's figures really are.

``spotgpu profile fit`` streams schema v1 records (``spotgpu.economics.telemetry``) through
:class:`FitAccumulator`, whose state grows with the number of VMs and measured events, not
with the number of lines, and returns a :class:`ProfileFit`:

* interruptions per spot node-hour per pool, per pool and SKU, per pool and zone, with the
  exposure hours and counts behind each and an exact Poisson interval (few interruptions
  give a wide interval, and no exposure is said to be too little data);
* reacquisition latency (median, p90, samples), launch failures by reason (quota apart from
  capacity: quota needs a ticket, not the ladder), notice lead times, checkpoint write/load
  p90 and size, boot-to-ready;
* each GPU model's median step time and its speed against the reference model
  (:class:`GpuSpeeds`, what ``gpu.relativeThroughput`` states by hand);
* each SKU's spot price (:class:`SkuPrices`): median, min and max over the observations, the
  zones they came from. A price is per SKU, not per pool, so the profile takes one only when the
  caller names the SKU (``--sku``): a fleet of two types has no one spot price to guess.

An interruption is counted once per VM (the agent's preempt notice and the controller's
interruption event of the same VM are one loss). The rate counts only VMs whose lifetime
is in the logs (the agents' logs, or v1 ``node_started``): the controller's events alone carry
no exposure, and their losses are reported beside the rate, not divided by a guess.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from statistics import NormalDist
from typing import Any

from spotgpu.catalogue import list_price
from spotgpu.catalogue.names import region_of
from spotgpu.contract.interruptions import LOSS_NOTICES
from spotgpu.economics.telemetry import TelemetryRecord
from spotgpu.models import WorkloadProfile
from spotgpu.models.workload import MAX_RELATIVE_SPEED

#: Two-sided confidence of the interruption-rate interval.
CONFIDENCE = 0.90
#: Fewer interruptions than this and the rate is stated with a warning that its interval is wide.
FEW_INTERRUPTIONS = 5
#: Less spot exposure than this (node-hours) and the measured rate is reported, not applied: one
#: interruption in a two-minute test would read as 30 per node-hour.
MIN_EXPOSURE_NODE_HOURS = 1.0
#: Fewer latency (or timing) samples than this and the figure is flagged as few samples.
FEW_SAMPLES = 5


#: Fewer step-time reports of a GPU model than this and its speed is listed, not used: a few
#: reports from one warm-up or one noisy neighbour would set the price of every hour on that model.
MIN_THROUGHPUT_SAMPLES = 5


#: From this many events on, the interval uses the Wilson-Hilferty approximation (the exact sum is O(k)).
LARGE_COUNT = 100


def _poisson_cdf(k: int, mu: float) -> float:
    term = total = math.exp(-mu)
    for i in range(1, k + 1):
        term *= mu / i
        total += term
    return min(1.0, total)


def poisson_interval(k: int, exposure: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate with ``k`` events over ``exposure`` hours."""
    alpha = (1.0 - confidence) / 2.0
    if k >= LARGE_COUNT:  # Wilson-Hilferty: within 1e-5 of the exact bounds at k=100, O(1), and no exp(-mu) underflow
        z = NormalDist().inv_cdf(1.0 - alpha)
        lo = k * (1 - 1 / (9 * k) - z / (3 * math.sqrt(k))) ** 3
        hi = (k + 1) * (1 - 1 / (9 * (k + 1)) + z / (3 * math.sqrt(k + 1))) ** 3
        return lo / exposure, hi / exposure

    def solve(target: float, upper: bool) -> float:
        lo, hi = 0.0, max(10.0, 4.0 * (k + 5))
        for _ in range(80):
            mid = (lo + hi) / 2.0
            # upper bound: P(X <= k | mid) = alpha; lower: P(X >= k | mid) = alpha
            value = _poisson_cdf(k, mid) if upper else 1.0 - _poisson_cdf(k - 1, mid)
            if (value > target) == upper:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2.0

    lower = 0.0 if k == 0 else solve(alpha, upper=False)
    return lower / exposure, solve(alpha, upper=True) / exposure


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (the p90 of 10 samples is the 9th smallest)."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q * len(s)) - 1))]


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"samples": 0, "median": None, "p90": None, "note": "too little data: no samples in the telemetry"}
    out: dict[str, Any] = {"samples": len(values), "median": round(percentile(values, 0.5), 3),
                           "p90": round(percentile(values, 0.9), 3), "mean": round(sum(values) / len(values), 3)}  # fmt: skip
    if len(values) < FEW_SAMPLES:
        out["note"] = f"few samples ({len(values)}): the p90 is the largest of them, not a tail estimate"
    return out


@dataclass
class _Node:
    pool: str
    start: float | None = None
    end: float | None = None
    capacity: str | None = None
    zone: str | None = None
    sku: str | None = None
    lost_at: float | None = None
    noticed_at: float | None = None


@dataclass(frozen=True)
class RateCell:
    """Interruptions of one slice of the fleet over its spot exposure."""

    key: str
    node_hours: float
    interruptions: int

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"slice": self.key, "spotNodeHours": round(self.node_hours, 3),
                               "interruptions": self.interruptions}  # fmt: skip
        if self.node_hours <= 0:
            return {**out, "perNodeHour": None, "interval": None,
                    "note": "too little data: no spot node-hours (no VM lifetime in the logs)"}  # fmt: skip
        lo, hi = poisson_interval(self.interruptions, self.node_hours)
        out |= {"perNodeHour": round(self.interruptions / self.node_hours, 6),
                "interval": [round(lo, 6), round(hi, 6)], "confidence": CONFIDENCE}  # fmt: skip
        if self.interruptions < FEW_INTERRUPTIONS:
            out["note"] = (f"few interruptions ({self.interruptions} in {self.node_hours:.3g} node-hours): the rate is "
                           f"known only within {lo:.4g}-{hi:.4g}/h")  # fmt: skip
        return out


@dataclass
class FitAccumulator:
    """Streaming state of the fit: per VM, per pool, and the measured samples."""

    pool: str | None = None
    nodes: dict[tuple[str, str], _Node] = field(default_factory=dict)
    last_ts: float = 0.0
    unattributed_losses: Counter[str] = field(default_factory=Counter)
    _losses_by_pool: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    _measured_ready: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    _ready_by_pool: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    notice_lead: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    launch_failures: Counter[str] = field(default_factory=Counter)
    launch_failures_by_zone: Counter[str] = field(default_factory=Counter)
    writes: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    boot: list[float] = field(default_factory=list)
    #: GPU model (None: not named) -> (mean step seconds, steps) per report, and the VMs that reported
    step_times: dict[str | None, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    step_nodes: dict[str | None, set[str]] = field(default_factory=lambda: defaultdict(set))
    step_pools: set[str] = field(default_factory=set)
    pools: set[str] = field(default_factory=set)
    providers: set[str] = field(default_factory=set)
    #: SKU -> its spot price observations; and the pools v1 price records named
    prices: dict[str, _PriceSamples] = field(default_factory=dict)
    price_pools: set[str] = field(default_factory=set)

    def add_all(self, records: Iterable[TelemetryRecord]) -> FitAccumulator:
        for r in records:
            self.add(r)
        return self

    def add(self, r: TelemetryRecord) -> None:
        if r.event == "spot_price":  # a market's fact: it moves neither the end of the logs nor the provider
            self._price(r)
            return
        pool = r.pool
        if pool is None or (self.pool is not None and pool != self.pool):
            return  # validation lets only a spot_price leave out its pool
        self.pools.add(pool)
        if r.provider:
            self.providers.add(r.provider)
        self.last_ts = max(self.last_ts, r.ts)
        ev = r.event
        node = self._node(r, pool) if r.node else None
        if ev == "node_started" and node is not None:
            node.start = r.ts if node.start is None else min(node.start, r.ts)
            node.capacity = r.capacity or node.capacity
        elif ev == "node_stopped" and node is not None:
            node.end = r.ts if node.end is None else min(node.end, r.ts)
        elif ev == "interrupted":
            self._loss(r, pool, node)
        elif ev == "notice":
            if r.seconds is not None:
                self.notice_lead[r.notice_kind or "unknown"].append(r.seconds)
            elif node is not None and r.notice_kind in LOSS_NOTICES and node.noticed_at is None:
                node.noticed_at = r.ts  # lead measured against the loss below
        elif ev == "replacement_ready":
            if r.seconds is not None:
                self._measured_ready[pool].append((r.ts, r.seconds))  # the controller's, from the loss it saw
            else:
                self._ready_by_pool[pool].append(r.ts)
        elif ev == "launch_failed":
            self.launch_failures[r.reason or "other"] += 1
            self.launch_failures_by_zone[f"{r.reason or 'other'}@{r.zone or '?'}"] += 1
        elif ev == "checkpoint_committed" and r.seconds is not None:
            self.writes.append(r.seconds)
            if r.bytes is not None:
                self.sizes.append(r.bytes)
        elif ev == "checkpoint_loaded" and r.seconds is not None:
            self.loads.append(r.seconds)
        elif ev == "node_ready" and r.seconds is not None:
            self.boot.append(r.seconds)
        elif ev == "throughput" and r.seconds is not None:
            self.step_times[r.gpu_model].append((r.seconds, r.steps or 1))
            self.step_nodes[r.gpu_model].add(f"{pool}/{r.node or '?'}")
            self.step_pools.add(pool)

    def _price(self, r: TelemetryRecord) -> None:
        if r.pool is not None and self.pool is not None and r.pool != self.pool:
            return  # a price one emitter saw for another pool; a price without a pool holds for any
        if r.pool is not None:
            self.price_pools.add(r.pool)
        if r.sku is None or r.usd_per_hour is None:  # validation requires both
            return
        samples = self.prices.get(r.sku)
        if samples is None:
            samples = self.prices[r.sku] = _PriceSamples()
        samples.add(r.usd_per_hour, r)

    def _node(self, r: TelemetryRecord, pool: str) -> _Node:
        key = (pool, str(r.node))
        node = self.nodes.get(key)
        if node is None:
            node = self.nodes[key] = _Node(pool)
        node.zone = r.zone or node.zone
        node.sku = r.sku or node.sku
        return node

    def _loss(self, r: TelemetryRecord, pool: str, node: _Node | None) -> None:
        if node is None:
            self.unattributed_losses[pool] += 1
            self._losses_by_pool[pool].append(r.ts)
            return
        if node.lost_at is not None:  # the same VM seen by the agent and the controller: one loss
            node.lost_at = min(node.lost_at, r.ts)
            return
        node.lost_at = r.ts
        self._losses_by_pool[pool].append(r.ts)
        if node.noticed_at is not None:
            self.notice_lead["derived"].append(max(0.0, r.ts - node.noticed_at))

    def result(self, now: float | None = None, price_sku: str | None = None) -> ProfileFit:
        """The fit; ``price_sku`` names the SKU whose median spot price becomes ``prices.spotPerHour``."""
        end_of_logs = now if now is not None else self.last_ts
        cells: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        lost_without_lifetime: Counter[str] = Counter(self.unattributed_losses)
        for n in self.nodes.values():
            if n.start is None:
                if n.lost_at is not None:
                    lost_without_lifetime[n.pool] += 1
                continue
            if n.capacity != "spot":
                continue
            stop = min(x for x in (n.lost_at, n.end, end_of_logs) if x is not None)
            hours = max(0.0, stop - n.start) / 3600.0
            lost = 1.0 if n.lost_at is not None else 0.0
            for key in (n.pool, f"{n.pool} / sku {n.sku or '?'}", f"{n.pool} / zone {n.zone or '?'}"):
                cells[key][0] += hours
                cells[key][1] += lost
        for pool in self.pools:
            cells.setdefault(pool, [0.0, 0.0])
        derived = _match_latencies(self._losses_by_pool, self._ready_by_pool)
        measured, fills = _after_a_loss(self._losses_by_pool, self._measured_ready)
        return ProfileFit(
            pools=sorted(self.pools),
            providers=sorted(self.providers),
            rates=[RateCell(k, v[0], int(v[1])) for k, v in sorted(cells.items())],
            lost_without_lifetime=dict(lost_without_lifetime),
            fills_without_loss=fills,
            reacquisition_seconds=[*measured, *derived],
            notice_lead_seconds={k: list(v) for k, v in self.notice_lead.items()},
            launch_failures=dict(self.launch_failures),
            launch_failures_by_zone=dict(self.launch_failures_by_zone),
            checkpoint_write_seconds=self.writes,
            checkpoint_load_seconds=self.loads,
            checkpoint_bytes=self.sizes,
            boot_to_ready_seconds=self.boot,
            step_times={m: list(v) for m, v in self.step_times.items()},
            step_nodes={m: len(v) for m, v in self.step_nodes.items()},
            step_pools=sorted(self.step_pools),
            spot_prices={sku: v.freeze(sku) for sku, v in sorted(self.prices.items())},
            price_sku=price_sku,
        )


@dataclass
class _PriceSamples:
    """One SKU's spot price observations while the records stream by (a few per zone and day)."""

    prices: list[float] = field(default_factory=list)
    zones: set[str] = field(default_factory=set)
    providers: set[str] = field(default_factory=set)
    first: float = math.inf
    last: float = -math.inf

    def add(self, usd_per_hour: float, r: TelemetryRecord) -> None:
        self.prices.append(usd_per_hour)
        self.zones.add(r.zone or "?")
        if r.provider:
            self.providers.add(r.provider)
        self.first, self.last = min(self.first, r.ts), max(self.last, r.ts)

    def freeze(self, sku: str) -> SkuPrices:
        return SkuPrices(sku, tuple(sorted(self.prices)), tuple(sorted(self.zones)), tuple(sorted(self.providers)),
                         self.first, self.last)  # fmt: skip


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class SkuPrices:
    """One SKU's spot price over the telemetry's window: each observation (an AWS price change, an Azure
    quote, a v1 record) counts once, since exports say when a price began, not how long it held."""

    sku: str
    prices: tuple[float, ...]  # sorted
    zones: tuple[str, ...]
    providers: tuple[str, ...]
    first: float
    last: float

    @property
    def median(self) -> float:
        return percentile(list(self.prices), 0.5)

    def notes(self) -> list[str]:
        out = []
        if len(self.prices) < FEW_SAMPLES:
            azure = " (an Azure page quotes each region once)" if "azure" in self.providers else ""
            out.append(f"few samples ({len(self.prices)}): the median is one of them, not a market's middle{azure}")
        regions = sorted({region_of(z) or z for z in self.zones})  # an Azure price's zone is its region
        if len(regions) > 1:
            out.append(f"prices from {len(regions)} regions ({', '.join(regions)}): the median mixes them; export "
                       "the pool's region only")  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        quote = list_price(self.sku)
        out: dict[str, Any] = {
            "sku": self.sku, "providers": list(self.providers), "samples": len(self.prices),
            "medianUsdPerHour": round(self.median, 6), "minUsdPerHour": self.prices[0],
            "maxUsdPerHour": self.prices[-1], "zones": list(self.zones), "window": [_iso(self.first), _iso(self.last)],
            "onDemandListUsdPerHour": quote.usd_per_hour if quote else None,
        }  # fmt: skip
        notes = self.notes()
        return {**out, "note": "; ".join(notes)} if notes else out


#: A measured reacquisition answers a loss seen up to this long before its latency began (a tick or two).
LOSS_WINDOW_SECONDS = 300.0


def _after_a_loss(
    losses: dict[str, list[float]], readies: dict[str, list[tuple[float, float]]]
) -> tuple[list[float], int]:
    """Measured latencies that follow a loss of their pool; the rest are fills (a pool's first, a scale-up)."""
    kept, fills = [], 0
    for pool, pairs in readies.items():
        times = sorted(losses.get(pool, []))
        for t, latency in pairs:
            i = bisect.bisect_left(times, t - latency - LOSS_WINDOW_SECONDS)
            if i < len(times) and times[i] <= t:
                kept.append(latency)
            else:
                fills += 1
    return kept, fills


def _match_latencies(losses: dict[str, list[float]], readies: dict[str, list[float]]) -> list[float]:
    """Each unmeasured ``replacement_ready`` answers the oldest loss of its pool before it."""
    out = []
    for pool, ready_times in readies.items():
        pending = sorted(losses.get(pool, []))
        i = 0
        for t in sorted(ready_times):
            if i < len(pending) and pending[i] <= t:
                out.append(t - pending[i])
                i += 1
    return out


@dataclass(frozen=True)
class ProfileFit:
    pools: list[str]
    providers: list[str]
    rates: list[RateCell]
    lost_without_lifetime: dict[str, int]
    fills_without_loss: int
    reacquisition_seconds: list[float]
    notice_lead_seconds: dict[str, list[float]]
    launch_failures: dict[str, int]
    launch_failures_by_zone: dict[str, int]
    checkpoint_write_seconds: list[float]
    checkpoint_load_seconds: list[float]
    checkpoint_bytes: list[int]
    boot_to_ready_seconds: list[float]
    step_times: dict[str | None, list[tuple[float, int]]] = field(default_factory=dict)
    step_nodes: dict[str | None, int] = field(default_factory=dict)
    step_pools: list[str] = field(default_factory=list)
    spot_prices: dict[str, SkuPrices] = field(default_factory=dict)
    price_sku: str | None = None

    def spot_price(self) -> tuple[float | None, str]:
        """The ``prices.spotPerHour`` the telemetry gives (the median of ``price_sku``), and how, or None and why not."""
        priced = ", ".join(self.spot_prices)
        if not self.spot_prices:
            return None, ("too little data: no spot price in the telemetry (pass an AWS describe-spot-price-history "
                          "or Azure retail prices export, or v1 spot_price records)")  # fmt: skip
        if self.price_sku is None:
            return None, (f"listed, not applied: pass --sku NAME (priced: {priced}) to make that SKU's median spot "
                          "price the profile's")  # fmt: skip
        cell = self.spot_prices.get(self.price_sku)
        if cell is None:
            return None, f"no spot price of --sku {self.price_sku} in the telemetry (priced: {priced})"
        return round(cell.median, 6), (f"the median of {self.price_sku}'s {len(cell.prices)} price(s) in "
                                       f"{len(cell.zones)} zone(s), {_iso(cell.first)} to {_iso(cell.last)}")  # fmt: skip

    def gpu_speeds(self, base: WorkloadProfile | None = None) -> GpuSpeeds:
        """Each GPU model's speed against the base profile's reference model (else the most sampled one)."""
        models = [ModelSteps(m, len(v), sum(n for _, n in v), self.step_nodes.get(m, 0), weighted_median(v))
                  for m, v in sorted(self.step_times.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))]  # fmt: skip
        return GpuSpeeds.of(models, base, self.step_pools)

    def pool_rate(self) -> RateCell | None:
        """The rate over every pool read (one pool, with ``--pool``)."""
        top = [c for c in self.rates if c.key in self.pools]
        if not top:
            return None
        return RateCell(" + ".join(c.key for c in top), sum(c.node_hours for c in top), sum(c.interruptions for c in top))

    def profile_updates(self) -> tuple[dict[str, float], dict[str, str]]:
        """WorkloadProfile fields (camelCase) the telemetry measures, and why each other one is not updated."""
        out: dict[str, float] = {}
        why: dict[str, str] = {}
        rate = self.pool_rate()
        if rate is None or rate.node_hours <= 0:
            why["interruptionsPerHour"] = "too little data: no spot node-hours in the logs (give the agents' events logs)"
        elif rate.interruptions == 0:
            hi = poisson_interval(0, rate.node_hours)[1]
            why["interruptionsPerHour"] = (f"too little data: 0 interruptions in {rate.node_hours:.1f} spot node-hours "
                                           f"(rate below {hi:.4g}/h at {CONFIDENCE:.0%}); kept the base figure")  # fmt: skip
        elif rate.node_hours < MIN_EXPOSURE_NODE_HOURS:
            lo, hi = poisson_interval(rate.interruptions, rate.node_hours)
            why["interruptionsPerHour"] = (f"too little data: {rate.interruptions} interruption(s) in {rate.node_hours:.2f} "
                                           f"spot node-hours, under the {MIN_EXPOSURE_NODE_HOURS:g} needed (rate "
                                           f"{lo:.4g}-{hi:.4g}/h at {CONFIDENCE:.0%}); kept the base figure")  # fmt: skip
        else:
            out["interruptionsPerHour"] = round(rate.interruptions / rate.node_hours, 6)
        why["gangInterruptionsPerHour"] = ("not measured from telemetry: the logs count VM losses, not a gang's; fit "
                                           "it from availability traces (profile fit --traces DIR --nodes N)")  # fmt: skip
        pairs = (
            ("expectedReacquisitionSeconds", self.reacquisition_seconds, "mean"),
            ("checkpointWriteSeconds", self.checkpoint_write_seconds, "p90"),
            ("checkpointLoadSeconds", self.checkpoint_load_seconds, "p90"),
            ("restartSeconds", self.boot_to_ready_seconds, "p90"),
        )
        for name, values, how in pairs:
            if not values:
                why[name] = "too little data: no samples in the telemetry"
            else:
                out[name] = round(sum(values) / len(values) if how == "mean" else percentile(values, 0.9), 3)
        if self.checkpoint_bytes:
            out["checkpointBytes"] = max(self.checkpoint_bytes)
        else:
            why["checkpointBytes"] = "too little data: no committed checkpoint carried its size"
        price, how = self.spot_price()
        if price is None:
            why["prices.spotPerHour"] = how
        else:
            out["prices.spotPerHour"] = price
        return out, why

    def to_dict(self, base: WorkloadProfile | None = None) -> dict[str, Any]:
        """The fit as JSON (camelCase, no NaN); ``base`` names the GPU speeds' reference model."""
        updates, why = self.profile_updates()
        return {
            "pools": self.pools,
            "interruptions": [c.to_dict() for c in self.rates],
            "lostWithoutLifetime": self.lost_without_lifetime,
            "reacquisitionSeconds": summary(self.reacquisition_seconds),
            "fillsWithoutLoss": self.fills_without_loss,
            "noticeLeadSeconds": {k: summary(v) for k, v in sorted(self.notice_lead_seconds.items())},
            "launchFailures": {"byReason": self.launch_failures, "byReasonAndZone": self.launch_failures_by_zone,
                               "note": "quota failures need a quota request, not the ladder; they are not "
                                       "counted in reacquisition latency"},
            "checkpointWriteSeconds": summary(self.checkpoint_write_seconds),
            "checkpointLoadSeconds": summary(self.checkpoint_load_seconds),
            "checkpointBytes": summary([float(b) for b in self.checkpoint_bytes]),
            "bootToReadySeconds": summary(self.boot_to_ready_seconds),
            "gpuSpeeds": self.gpu_speeds(base).to_dict(),
            "spotPrices": self.spot_prices_dict(),
            "measuredProfile": nest(updates),
            "notMeasured": nest(why),
        }


    def spot_prices_dict(self) -> dict[str, Any]:
        """Each SKU's prices, and which (if any) became ``prices.spotPerHour``."""
        price, how = self.spot_price()
        applied = None if price is None else {"sku": self.price_sku, "usdPerHour": price, "basis": how}
        out: dict[str, Any] = {"skus": [c.to_dict() for c in self.spot_prices.values()], "applied": applied}
        return out if applied else {**out, "note": how}


def nest(fields: dict[str, Any], into: dict[str, Any] | None = None) -> dict[str, Any]:
    """Profile fields by name laid into a document (``into``, else a new one): a dotted name such as
    ``prices.spotPerHour`` is a key of a block, so JSON keys stay camelCase and a profile takes the result."""
    out = dict(into or {})
    for name, value in fields.items():
        head, _, rest = name.partition(".")
        block = out.get(head)
        out[head] = nest({rest: value}, block if isinstance(block, dict) else None) if rest else value
    return out


def weighted_median(samples: list[tuple[float, int]]) -> float:
    """The median of per-report mean step times, each counted as often as the steps it covers.

    A report of 500 steps says more than one of 5; the lower weighted median (the smallest time
    at which half the steps are reached) is a time some report actually measured.
    """
    ordered = sorted(samples)
    half = sum(n for _, n in ordered) / 2.0
    seen = 0
    for seconds, n in ordered:
        seen += n
        if seen >= half:
            return seconds
    return ordered[-1][0]


@dataclass(frozen=True)
class ModelSteps:
    """The step-time reports of one GPU model (None: neither the workload nor the catalogue named it)."""

    gpu_model: str | None
    samples: int
    steps: int
    nodes: int
    median_step_seconds: float

    @property
    def enough(self) -> bool:
        return self.gpu_model is not None and self.samples >= MIN_THROUGHPUT_SAMPLES

    def why_unused(self) -> str | None:
        if self.gpu_model is None:
            return ("no GPU model: the workload named none and the catalogue does not know the VM's type (GCP N1 "
                    "with attached GPUs: pass gpu_model= to report_throughput); not used")  # fmt: skip
        if self.samples < MIN_THROUGHPUT_SAMPLES:
            return f"too few samples ({self.samples} < {MIN_THROUGHPUT_SAMPLES}): listed, not used"
        return None


#: The range ``gpu.relativeThroughput`` accepts (``spotgpu.models.workload.GpuRequirement``).
SPEED_RANGE = (0.0, MAX_RELATIVE_SPEED)


@dataclass(frozen=True)
class GpuSpeeds:
    """Measured ``gpu.relativeThroughput``: reference median step seconds / each model's.

    The reference is the model the base profile's table gives 1.0 (the type ``workHours`` was
    measured on); only then is the table laid over the measured profile (``applies``). Without
    one the most sampled model is the reference, said so: the speeds are right relative to each
    other, but which type ``workHours`` means is the profile's to say, not the logs'.
    """

    models: list[ModelSteps]
    reference: str | None
    basis: str
    applies: bool
    speeds: dict[str, float]  # usable models' speeds, the reference's 1.0 included
    unused: dict[str, str]  # model -> why its measured speed is not used (beyond why_unused)
    pools: list[str] = field(default_factory=list)  # the pools whose workloads reported

    @classmethod
    def of(cls, models: list[ModelSteps], base: WorkloadProfile | None, pools: list[str] | None = None) -> GpuSpeeds:
        usable = [m for m in models if m.enough]
        reference, basis, applies = _reference(usable, models, base)
        speeds: dict[str, float] = {}
        unused: dict[str, str] = {}
        ref = next((m for m in usable if m.gpu_model == reference), None)
        for m in usable if ref is not None else []:
            assert ref is not None and m.gpu_model is not None
            speed = 1.0 if m is ref else round(ref.median_step_seconds / m.median_step_seconds, 4)
            if SPEED_RANGE[0] < speed <= SPEED_RANGE[1]:
                speeds[m.gpu_model] = speed
            else:
                unused[m.gpu_model] = (f"speed {speed:g} is outside the {SPEED_RANGE[0]:g}-{SPEED_RANGE[1]:g} a "
                                       "relativeThroughput takes: check that both models ran the same job")  # fmt: skip
        return cls(models, reference, basis, applies, speeds, unused, list(pools or []))

    def table_over(self, base: dict[str, float]) -> dict[str, float]:
        """``base``'s table with the measured speeds over it: measured wins per model, the reference stays 1.0."""
        return {**base, **self.speeds}

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for m in self.models:
            row: dict[str, Any] = {"gpuModel": m.gpu_model, "samples": m.samples, "steps": m.steps, "nodes": m.nodes,
                                   "medianStepSeconds": round(m.median_step_seconds, 6),
                                   "relativeThroughput": self.speeds.get(str(m.gpu_model)) if m.enough else None}  # fmt: skip
            note = m.why_unused() or self.unused.get(str(m.gpu_model))
            if note is None and m.gpu_model == self.reference:
                note = "reference (1.0)"
            elif note is None and row["relativeThroughput"] is None:
                note = f"no reference to compare with: {self.basis}"
            if note:
                row["note"] = note
            rows.append(row)
        out = {"reference": self.reference, "referenceBasis": self.basis, "minSamples": MIN_THROUGHPUT_SAMPLES,
               "appliesToProfile": self.applies, "relativeThroughput": self.speeds, "models": rows, "pools": self.pools}  # fmt: skip
        if len(self.pools) > 1:  # one speed table is one job's: several pools may run several jobs
            out["note"] = (f"step times of {len(self.pools)} pools ({', '.join(self.pools)}) taken together; if they "
                           "run different jobs, fit each with --pool NAME")  # fmt: skip
        return out


def _most(m: ModelSteps) -> tuple[int, int, str]:
    return m.samples, m.steps, str(m.gpu_model)


def _reference(usable: list[ModelSteps], models: list[ModelSteps], base: WorkloadProfile | None) -> tuple[str | None, str, bool]:
    """(reference model, why it is the reference or why there is none, whether the table lays over ``base``)."""
    table = base.gpu.relative_throughput if base is not None and base.gpu is not None else {}
    ones = sorted(k for k, v in table.items() if v == 1.0)
    if ones and base is not None and base.gpu is not None:
        gpu = base.gpu
        hits = [m for m in usable if gpu.speed_of(m.gpu_model) == 1.0]
        if hits:
            ref = max(hits, key=_most)
            return ref.gpu_model, f"the base profile's gpu.relativeThroughput gives {', '.join(ones)} 1.0", True
        return None, (f"too little data: the base profile's reference model ({', '.join(ones)}: relativeThroughput 1.0) "
                      f"has no {MIN_THROUGHPUT_SAMPLES} step-time reports in the telemetry; no speed is measured "
                      "against it (run the job on it too)"), False  # fmt: skip
    if not usable:
        seen = "no step-time reports" if not models else f"no GPU model with {MIN_THROUGHPUT_SAMPLES} step-time reports"
        return None, f"too little data: {seen} in the telemetry (AgentClient.report_throughput)", False
    ref = max(usable, key=_most)
    if base is None:
        why = "no --profile names the type workHours was measured on"
    elif base.gpu is None:
        why = "the base profile has no gpu block to hold a table"
    else:
        why = "the base profile's gpu.relativeThroughput gives no model 1.0"
    return ref.gpu_model, (f"the model with the most samples ({ref.samples}): {why}, so the table is not laid over a "
                           "profile (add gpu.relativeThroughput: {MODEL: 1.0} for that type)"), False  # fmt: skip
