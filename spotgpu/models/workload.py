"""WorkloadProfile: the measured figures that drive every spot decision.

A profile describes a *class* of work (say "7B fine-tune on 8 GPUs"), not one job.
Its numbers come from measurement (the checkpoint library's timings, the agent's
boot-to-ready telemetry, the controller's reacquisition latency) and feed the cost
model, the checkpoint interval and the policy pack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from spotgpu.catalogue.fit import GpuNeed
from spotgpu.models.base import FieldProblem, SpotModel, fix_hint
from spotgpu.models.tiers import CheckpointTiers

#: Above this many interruptions per spot node-hour (one every 12 minutes) a rate is a unit mistake,
#: most often a percent typed as a rate: no GPU spot market takes VMs that fast and is worth using.
MAX_PLAUSIBLE_INTERRUPTIONS_PER_HOUR = 5.0

_NUMBER_WITH_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]+)\s*$")
_BYTE_UNITS: dict[str, float] = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip
_SECOND_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60,
                 "mins": 60, "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600}  # fmt: skip


def reject_unit(value: object, units: dict[str, float], what: str) -> object:
    """A number written with its unit (``60GB``, ``75s``) is refused with the plain number to write instead."""
    if not isinstance(value, str):
        return value
    m = _NUMBER_WITH_UNIT.match(value)
    if m is None:
        return value
    factor = units.get(m.group(2).lower())
    if factor is None:
        raise ValueError(f"{value!r} carries a unit; write a plain number of {what}")
    plain = float(m.group(1)) * factor
    text = f"{plain:.0f}" if plain.is_integer() else f"{plain:g}"
    raise ValueError(f"{value!r} carries a unit; write a plain number of {what}: {text}")


#: Recovery strategies the controller registers (spotgpu.controller).
FALLBACK_POLICIES = ("ladder", "fixed-wait", "uniform-progress", "on-demand-only")


class Prices(SpotModel):
    """USD prices the cost model uses; per node-hour unless stated."""

    spot_per_hour: float = Field(gt=0, json_schema_extra=fix_hint("set the spot USD/hour per node, e.g. 1.2"))
    on_demand_per_hour: float | None = Field(
        default=None,
        gt=0,
        description="On-demand USD/hour per node; when left out, each pool takes its fallback type's "
        "list price from the GPU catalogue (spotgpu/catalogue), and the preview says so.",
        json_schema_extra=fix_hint("set the on-demand USD/hour per node, e.g. 4.1, or leave it out for the catalogue price"),
    )
    storage_per_gb_month: float = Field(
        default=0.023, ge=0, json_schema_extra=fix_hint("set USD per GB-month, e.g. 0.023")
    )
    request_per_1000: float = Field(
        default=0.005, ge=0, json_schema_extra=fix_hint("set USD per 1000 write requests, e.g. 0.005")
    )
    deadline_penalty_per_hour: float = Field(
        default=0.0,
        ge=0,
        description="USD charged per hour the job finishes after its deadline (SLO penalty).",
        json_schema_extra=fix_hint("set a non-negative USD/hour penalty, 0 for none"),
    )

    @property
    def on_demand(self) -> float:
        """The on-demand USD/hour, resolved: in a stack, read it from ``StackConfig.workload_for(pool)``."""
        if self.on_demand_per_hour is None:
            raise ValueError(
                "onDemandPerHour is not resolved; take the workload from StackConfig.workload_for(pool), "
                "which prices it from the GPU catalogue"
            )
        return self.on_demand_per_hour

    @model_validator(mode="after")
    def _spot_cheaper(self, info: ValidationInfo) -> Prices:
        if self.on_demand_per_hour is None and not (info.context or {}).get("catalogue_prices"):
            raise FieldProblem(
                "is not set, and a profile outside a stack has no pool to price from the GPU catalogue",
                at="onDemandPerHour", value=None, fix="set the on-demand USD/hour per node, e.g. 4.1",
            )
        if self.on_demand_per_hour is not None and self.spot_per_hour > self.on_demand_per_hour:
            raise ValueError(
                f"spotPerHour {self.spot_per_hour} is above onDemandPerHour "
                f"{self.on_demand_per_hour}; check the prices (spot above on-demand is never worth it)"
            )
        return self


#: The largest speed ``gpu.relativeThroughput`` accepts against the reference type (a typo guard).
MAX_RELATIVE_SPEED = 100.0


def table_key(table: Mapping[str, float], model: str | None) -> str | None:
    """The ``relativeThroughput`` key that holds ``model``'s speed: its own name, else the longest key the
    name starts with as a word (``A100`` holds AWS's ``A100`` and GCP's ``A100 40GB``); None when none does."""
    if model is None:
        return None
    if model in table:
        return model
    keys = [k for k in table if model.startswith(k + " ")]
    return max(keys, key=len) if keys else None


def speed_basis(table: Mapping[str, float], model: str | None, memory_gib: float | None = None,
                reference: str | None = None, reference_memory_gib: float | None = None) -> tuple[float, str, str]:
    """(speed of ``model`` against the type workHours was measured on, where it came from, how).

    Where: ``table`` (``gpu.relativeThroughput``, typed or measured); ``spec prior`` (the catalogue's
    spec sheets against the table's reference model, 1.0, else a listed model scaled by its speed;
    without a table, against ``reference``, the pool's first type, which workHours is then taken to be
    measured on); ``reference`` (that type itself); ``unmeasured`` (no spec row: the slowest listed
    speed, 1.0 without a table). One rule for the preview, the stack check and the controller.
    """
    from spotgpu.catalogue import gpu_spec_gap, spec_prior

    key = table_key(table, model)
    if key is not None:
        return table[key], "table", f"gpu.relativeThroughput.{key}"
    if not table:
        if model is not None and model == reference:
            return 1.0, "reference", "the pool's first type: no gpu.relativeThroughput names the type workHours was measured on"
        found = spec_prior(model, reference, memory_gib, reference_memory_gib) if reference else None
        if found is not None:
            return found.speed, "spec prior", found.describe()
    else:
        anchors = sorted(table.items(), key=lambda kv: (kv[1] != 1.0, -kv[1], kv[0]))
        for anchor, anchor_speed in anchors:
            found = spec_prior(model, anchor, memory_gib)
            if found is not None:
                scaled = f" x {anchor}'s relativeThroughput {anchor_speed:g}" if anchor_speed != 1.0 else ""
                return round(found.speed * anchor_speed, 4), "spec prior", found.describe() + scaled
    why = gpu_spec_gap(model) if model else "the catalogue names no GPU model for the type"
    return min(table.values(), default=1.0), "unmeasured", f"{why}: taken at the slowest listed speed"


class GpuRequirement(SpotModel):
    """What the job needs of every GPU type a pool or rung may give it (``workloads.X.gpu``).

    Every type the pool may launch (each rung's, the fallback's) is judged against it
    when the config is read (``spotgpu.models.gpu_fit``), so an A100 40 GB rung for a
    job whose shards need 60 GB is a config error, not an out-of-memory crash at 3 am.
    """

    gpus_per_node: int = Field(
        ge=1,
        le=64,
        description="GPUs per node the job is laid out for on its first type: the gang is nodes x gpusPerNode GPUs.",
        json_schema_extra=fix_hint("set the GPUs each node of the job uses, e.g. 8"),
    )
    gpus_per_rank: int = Field(
        default=1,
        ge=1,
        le=64,
        description="GPUs one rank drives; a type must carry a whole number of ranks.",
        json_schema_extra=fix_hint("set 1 (one process per GPU) or the GPUs one rank drives"),
    )
    memory_per_gpu_gib: float | None = Field(
        default=None,
        gt=0,
        alias="memoryPerGpuGiB",
        description="GiB each GPU must have (measured peak); or give modelStateGiB to derive it.",
        json_schema_extra=fix_hint("set the measured peak GiB per GPU, e.g. 60"),
    )
    model_state_gib: float | None = Field(
        default=None,
        gt=0,
        alias="modelStateGiB",
        description="GiB of the whole training state (weights, gradients, optimizer) sharded over all GPUs: "
        "the need per GPU is modelStateGiB / GPUs x (1 + headroom).",
        json_schema_extra=fix_hint("set the training state's GiB, e.g. 16 bytes x parameters for Adam in mixed precision"),
    )
    headroom: float = Field(
        default=0.25,
        ge=0,
        le=4,
        description="Share added to a derived shard for activations, buffers and fragmentation.",
        json_schema_extra=fix_hint("use a fraction such as 0.25"),
    )
    models: tuple[str, ...] = Field(
        default=(),
        max_length=4,
        description="GPU models (catalogue names, e.g. 'H100 80GB') the job was validated on; empty: any.",
        json_schema_extra=fix_hint("list catalogue GPU model names, e.g. ['H100 80GB', 'A100 80GB'], at most 4"),
    )
    world_sizes: tuple[int, ...] = Field(
        default=(),
        max_length=4,
        description="Other gang sizes in GPUs the job may restart at (its restore reshards through DCP); "
        "empty: only nodes x gpusPerNode.",
        json_schema_extra=fix_hint("list GPU counts, e.g. [8, 32], at most 4"),
    )

    relative_throughput: dict[str, float] = Field(
        default_factory=dict,
        max_length=16,
        description="Measured work per hour of each GPU model (catalogue name) relative to the type workHours was "
        "measured on (1.0); the controller's deadline test reads it for the on-demand type. A model not in it takes "
        "its spec prior (the catalogue's dense tensor TFLOPS and memory bandwidth against a listed model, the lower "
        "ratio), shown as `spec prior`; a model with no spec row counts at the slowest listed speed. Empty: each pool's "
        "first type is the reference and the others take their spec priors against it.",
        json_schema_extra=fix_hint("map GPU model to measured speed, e.g. {A100: 1.0, H100: 2.5}"),
    )

    @model_validator(mode="after")
    def _one_memory_figure(self) -> GpuRequirement:
        if self.memory_per_gpu_gib is not None and self.model_state_gib is not None:
            raise FieldProblem("is set beside memoryPerGpuGiB; give one memory figure", at="modelStateGiB",
                               value=self.model_state_gib, fix="keep memoryPerGpuGiB (measured) or modelStateGiB")
        if self.gpus_per_node % self.gpus_per_rank:
            raise FieldProblem(f"is not a whole number of ranks of gpusPerRank {self.gpus_per_rank}",
                               at="gpusPerNode", value=self.gpus_per_node,
                               fix=f"use a multiple of {self.gpus_per_rank}, or correct gpusPerRank")
        for i, model in enumerate(self.models):
            if not model.strip() or len(model) > 24 or any(c in model for c in ";=+"):
                raise FieldProblem("is not a GPU model name", at=f"models[{i}]", value=model,
                                   fix="use a catalogue name such as 'H100 80GB' (at most 24 characters, no ';', '=' or '+')")
        for model, speed in self.relative_throughput.items():
            if not 0 < speed <= MAX_RELATIVE_SPEED:
                raise FieldProblem("is not a relative speed", at=f"relativeThroughput.{model}", value=speed,
                                   fix=f"use a positive factor against the measured type, e.g. 2.5 (at most {MAX_RELATIVE_SPEED:g})")
        for i, size in enumerate(self.world_sizes):
            if size < 1 or size % self.gpus_per_rank:
                raise FieldProblem(f"is not a whole number of ranks of {self.gpus_per_rank} GPU(s)",
                                   at=f"worldSizes[{i}]", value=size, fix="list positive multiples of gpusPerRank")
        return self

    def speed_of(self, model: str | None) -> float | None:
        """The measured relative speed of ``model``; None when unmeasured (see :meth:`speed`).

        The catalogue names a model per cloud (``A100`` on AWS, ``A100 40GB`` on GCP and Azure):
        a key matches its own name, else the longest key the name starts with as a word.
        """
        key = table_key(self.relative_throughput, model)
        return None if key is None else self.relative_throughput[key]

    def table_key(self, model: str | None) -> str | None:
        return table_key(self.relative_throughput, model)

    @property
    def conservative_speed(self) -> float:
        """The speed a model with neither a measurement nor a spec row is taken at: the slowest listed one
        (1.0 without a table)."""
        return min(self.relative_throughput.values(), default=1.0)

    def speed(self, model: str | None, memory_gib: float | None = None, reference: str | None = None) -> tuple[float, bool]:
        """(speed of ``model`` against the reference type, whether the table states it).

        A model the table does not list takes its spec prior (:meth:`speed_basis`), never 1.0 by
        default; a model with no spec row counts at the slowest listed speed (conservative: it does
        the least work per dollar).
        """
        speed, basis, _ = self.speed_basis(model, memory_gib, reference)
        return speed, basis == "table"

    def speed_basis(self, model: str | None, memory_gib: float | None = None, reference: str | None = None,
                    reference_memory_gib: float | None = None) -> tuple[float, str, str]:
        """:func:`speed_basis` of this block's table."""
        return speed_basis(self.relative_throughput, model, memory_gib, reference, reference_memory_gib)

    def need(self, nodes: int) -> GpuNeed:
        """The plain value every judge reads (``spotgpu.catalogue.fit``)."""
        return GpuNeed(
            nodes=nodes, gpus_per_node=self.gpus_per_node, gpus_per_rank=self.gpus_per_rank,
            memory_per_gpu_gib=self.memory_per_gpu_gib, model_state_gib=self.model_state_gib,
            headroom=self.headroom, models=self.models, world_sizes=self.world_sizes,
        )  # fmt: skip


#: The WorkloadProfile keys the fleet's telemetry measures (``spotgpu profile fit``): a stack's
#: ``measuredProfile`` file replaces exactly these; every other key stays as typed. A dotted name is
#: a key of a block (``prices.spotPerHour``: the stack's other prices stay).
MEASURED_FIELDS = (
    "interruptionsPerHour", "gangInterruptionsPerHour", "expectedReacquisitionSeconds", "checkpointWriteSeconds",
    "checkpointLoadSeconds", "restartSeconds", "checkpointBytes", "prices.spotPerHour",
)  # fmt: skip


def _measured_overlay(data: dict[str, object], base_dir: str | None) -> dict[str, object]:
    """``data`` with the measured figures of its ``measuredProfile`` file laid over it.

    The path is relative to ``base_dir`` (the Pulumi project directory the program runs in;
    default: the current directory). The file is what ``profile fit --out`` writes."""
    from pathlib import Path

    import yaml

    raw = data.get("measuredProfile", data.get("measured_profile"))
    if raw is None:
        return data
    fix = ("write it with `spotgpu profile fit --telemetry LOGS... --profile BASE.yaml --out PATH` "
           "(PATH relative to the project directory), or drop measuredProfile")  # fmt: skip
    if not isinstance(raw, str) or not raw.strip():
        raise FieldProblem("is not a file path", at="measuredProfile", value=raw, fix=fix)
    path = Path(raw) if Path(raw).is_absolute() else Path(base_dir or ".") / raw
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FieldProblem(f"no such file ({path.resolve()})", at="measuredProfile", value=raw, fix=fix) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        what = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise FieldProblem(f"cannot be read as YAML: {what}", at="measuredProfile", value=raw, fix=fix) from None
    if not isinstance(doc, dict):
        raise FieldProblem("does not hold a profile mapping", at="measuredProfile", value=raw, fix=fix)
    out = {**data, **{k: doc[k] for k in MEASURED_FIELDS if "." not in k and k in doc}}
    taken = [k for k in MEASURED_FIELDS if "." not in k and k in doc]
    spot = doc["prices"].get("spotPerHour") if isinstance(doc.get("prices"), dict) else None
    prices = data.get("prices")
    if spot is not None and isinstance(prices, dict):
        # the file's spot price (measured with `profile fit --sku`, else its base's) wins; the stack's other
        # prices (on-demand, storage, penalty) stay as typed, and a pool's own spotPerHour still wins over both
        if isinstance(spot, bool) or not isinstance(spot, int | float) or not 0 < spot < float("inf"):
            raise FieldProblem(f"holds prices.spotPerHour {spot!r}, not a USD price per hour", at="measuredProfile",
                               value=raw, fix=fix)  # fmt: skip
        out["prices"] = {**prices, ("spot_per_hour" if "spot_per_hour" in prices else "spotPerHour"): spot}
        taken.append("prices.spotPerHour")
    speeds = (doc.get("gpu") or {}).get("relativeThroughput") if isinstance(doc.get("gpu"), dict) else None
    gpu = data.get("gpu")
    if isinstance(speeds, dict) and speeds and isinstance(gpu, dict):
        # measured speeds per GPU model win over typed ones; the rest of the gpu block stays as typed
        typed = gpu.get("relativeThroughput", gpu.get("relative_throughput")) or {}
        key = "relativeThroughput" if "relative_throughput" not in gpu else "relative_throughput"
        out["gpu"] = {**gpu, key: {**typed, **speeds}}
        taken += [f"gpu.relativeThroughput.{m}" for m in speeds]
    out["sources"] = {**_typed_sources(data), **_file_sources(doc, raw, taken)}
    return out


def _typed_sources(data: dict[str, object]) -> dict[str, str]:
    given = data.get("sources")
    return {str(k): str(v) for k, v in given.items()} if isinstance(given, dict) else {}


def _file_sources(doc: dict[str, object], raw: str, taken: list[str]) -> dict[str, str]:
    """Where each figure taken from a measured file came from: the file's own ``sources`` entry (what
    ``profile fit --out`` wrote: telemetry files and samples, or the traces it fitted), else that the
    file only carried its base profile's figure (not measured)."""
    recorded = _typed_sources(doc)
    out = {}
    for key in taken:
        detail = recorded.get(key)
        out[key] = f"{detail} (measuredProfile {raw})" if detail else f"copied from the base profile in {raw}, not measured"
    return out


#: What a ``sources`` entry says of its figure, by its first word: the kinds the preview and ``cost`` print.
SOURCE_KINDS = ("measured", "fitted", "typed", "catalogue", "copied")


class WorkloadProfile(SpotModel):
    measured_profile: str | None = Field(
        default=None,
        description="A file written by `spotgpu profile fit --out` (relative to the project directory): its "
        "measured figures (" + ", ".join(MEASURED_FIELDS) + ") replace the ones typed here (the other prices stay; "
        "a pool's own spotPerHour still wins), and its measured gpu.relativeThroughput entries replace those typed "
        "in this workload's gpu block (when it has one).",
        json_schema_extra=fix_hint("give the path `spotgpu profile fit --out` wrote, e.g. measured/llm-finetune.yaml"),
    )
    checkpoint_bytes: int = Field(
        gt=0, json_schema_extra=fix_hint("set the size of one full checkpoint in bytes, e.g. 16000000000")
    )
    checkpoint_write_seconds: float = Field(
        gt=0, json_schema_extra=fix_hint("set the measured seconds to write and commit one checkpoint")
    )
    checkpoint_load_seconds: float = Field(
        gt=0, json_schema_extra=fix_hint("set the measured seconds to restore one checkpoint")
    )
    restart_seconds: float = Field(
        ge=0,
        description="Boot to training-ready, excluding the checkpoint load.",
        json_schema_extra=fix_hint("set measured boot-to-ready seconds, e.g. 240"),
    )
    expected_reacquisition_seconds: float = Field(
        ge=0,
        description="Mean seconds from interruption until replacement capacity is running.",
        json_schema_extra=fix_hint("set the measured mean reacquisition seconds, e.g. 600"),
    )
    checkpoint_interval_seconds: int | Literal["auto"] = Field(
        default="auto",
        description="Periodic checkpoint interval, or auto to derive it from cost and exposure.",
        json_schema_extra=fix_hint("use a positive number of seconds or the string auto"),
    )
    interruptions_per_hour: float = Field(
        ge=0,
        le=60,
        description="Interruption exposure: expected spot interruptions per node-hour.",
        json_schema_extra=fix_hint("set the measured rate, e.g. 0.05 (one per 20 hours)"),
    )
    gang_interruptions_per_hour: float | None = Field(
        default=None,
        ge=0,
        le=60,
        description="Interruptions per hour of the whole gang of `nodes`, measured on gangs of that size "
        "(`spotgpu profile fit --traces DIR --nodes N`): a zone's capacity goes all at once, so a gang in one "
        "zone is not N independent nodes. Replaces interruptionsPerHour x nodes in the cost model and the "
        "interval; none: interruptionsPerHour x nodes.",
        json_schema_extra=fix_hint("set the gang's measured rate per hour, e.g. 0.3, or leave it out"),
    )
    work_hours: float = Field(
        gt=0, json_schema_extra=fix_hint("set the wall-clock hours of useful compute one job needs on all its nodes, e.g. 24")
    )
    deadline_hours: float | None = Field(
        default=None,
        gt=0,
        description="Wall-clock hours from submission by which the job must finish; none for no deadline.",
        json_schema_extra=fix_hint("set a positive number of hours, or leave it out"),
    )
    max_lost_work_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="Bound on expected compute lost per interruption (the policy pack checks it).",
        json_schema_extra=fix_hint("set the most seconds of work you accept losing per interruption"),
    )
    nodes: int = Field(default=1, ge=1, le=4096, json_schema_extra=fix_hint("set 1 to 4096 nodes"))
    fallback_policy: str = Field(
        default="ladder",
        description=f"Recovery strategy by name: {', '.join(FALLBACK_POLICIES)}.",
        json_schema_extra=fix_hint(f"use one of {', '.join(FALLBACK_POLICIES)}"),
    )
    prices: Prices
    gpu: GpuRequirement | None = Field(
        default=None,
        description="What every GPU type of the pool must hold (memory, GPU count, validated models); "
        "none: any GPU type is taken as able to run the job.",
    )
    checkpoint_tiers: CheckpointTiers | None = Field(
        default=None,
        description="A node-local tier and peer copies in front of the object store (spotgpu.models.tiers): "
        "checkpointIntervalSeconds is then the local interval, durableIntervalSeconds the store's.",
    )
    sources: dict[str, str] = Field(
        default_factory=dict,
        max_length=32,
        description="Where figures came from, by key (`interruptionsPerHour`, `prices.spotPerHour`, "
        "`gpu.relativeThroughput.A100`): `measured: ...` (telemetry files and samples) or `fitted from traces: "
        "...`. `spotgpu profile fit --out` writes it; a measuredProfile's entries are laid over the workload's. "
        "The preview and `cost` print every figure's source; a figure without an entry is typed (its key).",
        json_schema_extra=fix_hint("map a figure's key to where it came from, e.g. {interruptionsPerHour: "
                                   "'fitted from traces: ...'}"),
    )

    @property
    def gpu_need(self) -> GpuNeed | None:
        return None if self.gpu is None else self.gpu.need(self.nodes)

    def work_per_node_hour(self, gpus: float | None = None, model: str | None = None, reference: str | None = None) -> float:
        """Work-hours one node of a type does per hour: its GPUs x their speed (the unit of
        ``costCeilingPerWorkHour``; a work-hour is one hour of the reference GPU's work).

        ``gpus`` defaults to the workload's ``gpu.gpusPerNode`` (1 without a ``gpu`` block, so a
        per work-hour ceiling then reads per node-hour of the reference type). ``reference`` is the
        pool's first type's GPU model, the reference when no ``relativeThroughput`` names one.
        """
        if self.gpu is None:
            return float(gpus or 1)
        return (gpus or self.gpu.gpus_per_node) * self.gpu.speed(model, reference=reference)[0]

    @model_validator(mode="before")
    @classmethod
    def _measured(cls, data: object, info: ValidationInfo) -> object:
        if not isinstance(data, dict):
            return data
        return _measured_overlay(data, (info.context or {}).get("project_dir"))

    @field_validator("checkpoint_bytes", mode="before")
    @classmethod
    def _bytes_without_unit(cls, value: object) -> object:
        return reject_unit(value, _BYTE_UNITS, "bytes")

    @field_validator(
        "checkpoint_write_seconds", "checkpoint_load_seconds", "restart_seconds", "expected_reacquisition_seconds",
        "max_lost_work_seconds", "checkpoint_interval_seconds", mode="before",
    )  # fmt: skip
    @classmethod
    def _seconds_without_unit(cls, value: object) -> object:
        return reject_unit(value, _SECOND_UNITS, "seconds")

    @field_validator("interruptions_per_hour", "gang_interruptions_per_hour")
    @classmethod
    def _plausible_rate(cls, value: float | None) -> float | None:
        if value is not None and value > MAX_PLAUSIBLE_INTERRUPTIONS_PER_HOUR:
            raise ValueError(
                f"{value:g} interruptions per node-hour is above the plausible {MAX_PLAUSIBLE_INTERRUPTIONS_PER_HOUR:g} "
                f"(one every {60 / MAX_PLAUSIBLE_INTERRUPTIONS_PER_HOUR:g} min); a percent typed as a rate? "
                f"{value:g}% per hour is {value / 100:g}; write the rate per spot node-hour, e.g. {value / 100:g}"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadProfile:
        if self.fallback_policy not in FALLBACK_POLICIES:
            raise ValueError(
                f"fallbackPolicy {self.fallback_policy!r} is unknown; use one of {', '.join(FALLBACK_POLICIES)}"
            )
        if isinstance(self.checkpoint_interval_seconds, int):
            if self.checkpoint_interval_seconds <= 0:
                raise ValueError("checkpointIntervalSeconds must be positive seconds or auto")
            write, what = self.periodic_write_seconds
            if self.checkpoint_interval_seconds <= write:
                raise ValueError(
                    f"checkpointIntervalSeconds {self.checkpoint_interval_seconds} is not longer than "
                    f"{what} {write:g}; the job would only checkpoint"
                )
        tiers = self.checkpoint_tiers
        if tiers is not None and isinstance(tiers.durable_interval_seconds, int):
            if tiers.durable_interval_seconds <= self.checkpoint_write_seconds:
                raise FieldProblem(
                    f"is not longer than checkpointWriteSeconds {self.checkpoint_write_seconds:g}, so uploads would "
                    "queue behind each other", at="checkpointTiers.durableIntervalSeconds",
                    value=tiers.durable_interval_seconds, fix="use more seconds than one upload takes, or auto",
                )  # fmt: skip
            local = self.checkpoint_interval_seconds
            if isinstance(local, int) and tiers.durable_interval_seconds < local:
                raise FieldProblem(
                    f"is shorter than the local interval checkpointIntervalSeconds {local}; the store gets every "
                    "k-th local generation", at="checkpointTiers.durableIntervalSeconds",
                    value=tiers.durable_interval_seconds, fix=f"use at least {local} seconds, or auto",
                )  # fmt: skip
        if self.deadline_hours is not None and self.deadline_hours < self.work_hours:
            raise ValueError(
                f"deadlineHours {self.deadline_hours} is shorter than workHours {self.work_hours}; "
                "no capacity can meet it"
            )
        return self

    @property
    def final_commit_seconds(self) -> float:
        """Seconds a final checkpoint needs to count: to the local tier and its peers with
        ``checkpointTiers``, else to the object store."""
        if self.checkpoint_tiers is None:
            return self.checkpoint_write_seconds
        from spotgpu.models.tiers import tier_commit_seconds

        return tier_commit_seconds(self.checkpoint_tiers, self.checkpoint_bytes, self.nodes)[0]

    @property
    def periodic_write_seconds(self) -> tuple[float, str]:
        """(seconds one periodic save blocks training, the figure's name): the tier's write with
        ``checkpointTiers``, else the object store's ``checkpointWriteSeconds``."""
        if self.checkpoint_tiers is None:
            return self.checkpoint_write_seconds, "checkpointWriteSeconds"
        from spotgpu.models.tiers import tier_write_seconds

        seconds, _ = tier_write_seconds(self.checkpoint_tiers, self.checkpoint_bytes, self.nodes)
        return seconds, "the local tier's write seconds (checkpointTiers.local.writeSeconds or its prior)"

    @property
    def slack_hours(self) -> float | None:
        return None if self.deadline_hours is None else self.deadline_hours - self.work_hours
