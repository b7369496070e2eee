"""The link contract between components, the policy pack, the agent and the controller.

The policy pack must judge *concrete cloud resources* (a stack written with raw
resources is judged the same way), so every link a spot pool needs is carried on
the resource itself: AWS tags, Azure tags, and GCP instance-template metadata
(labels cannot hold these values) plus labels for the simple keys.

Values stay within every cloud's limits: Azure and AWS tag values <= 256 chars;
GCP label values <= 63 chars of ``[a-z0-9_-]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spotgpu.catalogue.fit import GpuNeed
from spotgpu.models.base import FieldProblem
from spotgpu.models.ladder import FallbackLadder, StepKind, ceiling_admits
from spotgpu.models.pools import ControllerDeploySpec
from spotgpu.models.workload import WorkloadProfile

#: Every link key starts with this (the policy pack reads all keys that do).
PREFIX = "spotgpu-"
#: Role of the tagged resource: spot-pool | fallback | checkpoint-store | events | drill
ROLE = "spotgpu-role"
#: Stable pool name.
POOL = "spotgpu-pool"
#: URL of the pool's checkpoint store: s3://bucket/prefix, gs://bucket/prefix, az://account/container/prefix
CHECKPOINT_STORE = "spotgpu-checkpoint-store"
#: Name of the pool's on-demand fallback group (ASG, MIG or scale set).
FALLBACK_GROUP = "spotgpu-fallback-group"
#: Compact fallback ladder, see :func:`encode_ladder`.
LADDER = "spotgpu-ladder"
#: Compact workload figures, see :func:`encode_workload`.
WORKLOAD = "spotgpu-workload"
#: Periodic checkpoint interval actually configured, seconds.
CHECKPOINT_INTERVAL = "spotgpu-checkpoint-interval"
#: Provider notice contract name as installed by the bootstrap (aws, gcp-120, gcp-0, azure).
NOTICE = "spotgpu-notice"
#: Stated waivers (opt-outs) recorded for reviewers.
WAIVER = "spotgpu-waiver"
#: The pool's zones as the stack states them, comma-joined: an AWS group names subnets by id, which name no
#: zone, and the policy pack replays a pool's ladder on the traces of its zones.
ZONES = "spotgpu-zones"
#: Why no controller job in the stack grows this pool's fallback group (``controller: {enabled: false, waiver}``).
CONTROLLER_WAIVER = "spotgpu-controller-waiver"

#: The roles (``ROLE``'s values); a spot pool and a drill are named by the parts that look them up.
ROLES = ("spot-pool", "fallback", "checkpoint-store", "events", "drill", "controller")
SPOT_POOL_ROLE, DRILL_ROLE = "spot-pool", "drill"
#: Tags every resource of a stack carries besides the links (who owns it, which environment).
ENVIRONMENT = "spotgpu-environment"
OWNER = "spotgpu-owner"

#: Marker every bootstrap script contains; the policy pack looks for it.
AGENT_MARKER = "spotgpu-agent.service"

_STEP_CODES = {
    StepKind.SAME_POOL: "sp",
    StepKind.ALTERNATE_ZONE: "az",
    StepKind.ALTERNATE_SKU: "as",
    StepKind.ON_DEMAND: "od",
    StepKind.QUEUE_DEFER: "qd",
}
_CODE_STEPS = {v: k for k, v in _STEP_CODES.items()}


#: Suffix of a ceiling stated per work-hour (``costCeilingPerWorkHour``) in the ladder link.
PER_WORK_SUFFIX = "w"


def encode_ladder(ladder: FallbackLadder) -> str:
    """``sp:600:3.2;as:900:1.1w;od:900:12.5`` (kind:maxWaitSeconds:ceiling, USD per node-hour, or per
    work-hour with a ``w``), < 256 chars."""
    return ";".join(
        f"{_STEP_CODES[s.kind]}:{s.max_wait_seconds}:{s.ceiling:g}{PER_WORK_SUFFIX if s.per_work_hour else ''}"
        for s in ladder.steps
    )


@dataclass(frozen=True)
class DecodedStep:
    """One rung of the ladder link; its ceiling is per node-hour unless ``per_work_hour``."""

    kind: StepKind
    max_wait_seconds: float
    ceiling: float
    per_work_hour: bool = False

    @property
    def unit(self) -> str:
        return "USD/work-hour" if self.per_work_hour else "USD/h"

    def allows(self, usd_per_node_hour: float, work_per_node_hour: float) -> bool:
        """As :meth:`spotgpu.models.ladder.LadderStep.allows`: compared in the ceiling's own unit."""
        return ceiling_admits(self.ceiling, self.per_work_hour, usd_per_node_hour, work_per_node_hour)


def decode_ladder(text: str) -> list[DecodedStep]:
    """Inverse of :func:`encode_ladder`; raises ValueError on malformed text."""
    steps = []
    for part in filter(None, text.split(";")):
        bits = part.split(":")
        if len(bits) != 3 or bits[0] not in _CODE_STEPS:
            raise ValueError(f"malformed ladder step {part!r}; expected kind:wait:ceiling")
        per_work = bits[2].endswith(PER_WORK_SUFFIX)
        ceiling = float(bits[2][:-1] if per_work else bits[2])
        steps.append(DecodedStep(_CODE_STEPS[bits[0]], float(bits[1]), ceiling, per_work))
    return steps


_WORKLOAD_FIELDS = {
    "w": "checkpoint_write_seconds",
    "r": "interruptions_per_hour",
    "j": "gang_interruptions_per_hour",
    "b": "max_lost_work_seconds",
    "l": "checkpoint_load_seconds",
    "s": "restart_seconds",
    "q": "expected_reacquisition_seconds",
    "g": "checkpoint_bytes",
    "h": "work_hours",
    "d": "deadline_hours",
    "n": "nodes",
}
_PRICE_FIELDS = {"p": "spot_per_hour", "o": "on_demand_per_hour", "x": "deadline_penalty_per_hour"}


#: The workload's ``gpu`` block (what every GPU type must hold), see :func:`encode_gpu`.
_GPU_NUMBERS = {"c": "gpus_per_node", "k": "gpus_per_rank", "m": "memory_per_gpu_gib", "t": "model_state_gib",
                "e": "headroom"}
_GPU_LISTS = {"v": "models", "a": "world_sizes"}
#: ``gpu.relativeThroughput`` as ``u=A100:1+H100:2.5`` (model:speed joined by ``+``).
_GPU_SPEEDS = "u"
_SPEED_BAD = re.compile(r"[;:+=]")
#: Every cloud's tag value limit (AWS, Azure); the GCP metadata value holds far more.
TAG_VALUE_LIMIT = 256


def encode_gpu(profile: WorkloadProfile) -> list[str]:
    """``c=8;m=60;v=H100+A100;u=A100:1+H100:2.5`` (GPUs per node, per rank when not 1, memory or model
    state and headroom, validated models and other world sizes joined by ``+``, measured speeds per GPU
    model); nothing without a ``gpu`` block."""
    gpu = profile.gpu
    if gpu is None:
        return []
    parts = [f"c={gpu.gpus_per_node}"]
    if gpu.gpus_per_rank != 1:
        parts.append(f"k={gpu.gpus_per_rank}")
    if gpu.memory_per_gpu_gib is not None:
        parts.append(f"m={gpu.memory_per_gpu_gib:.12g}")
    if gpu.model_state_gib is not None:
        parts += [f"t={gpu.model_state_gib:.12g}", f"e={gpu.headroom:.12g}"]
    if gpu.models:
        parts.append("v=" + "+".join(gpu.models))
    if gpu.world_sizes:
        parts.append("a=" + "+".join(map(str, gpu.world_sizes)))
    if gpu.relative_throughput:
        bad = [m for m in gpu.relative_throughput if _SPEED_BAD.search(m)]
        if bad:
            raise FieldProblem("names a GPU model with one of ; : + =, which the workload tag cannot carry",
                               at="gpu.relativeThroughput", value=bad[0],
                               fix="name the model as the catalogue does (e.g. 'H100 80GB')")
        parts.append(f"{_GPU_SPEEDS}=" + "+".join(f"{m}:{v:.6g}" for m, v in gpu.relative_throughput.items()))
    return parts


#: ``checkpointTiers`` as ``L=keep:peerCopies:writeSeconds:commitSeconds:loadSeconds:durable:ramDiskGiB`` (resolved,
#: ``a`` for an auto durable interval), so the policy pack judges the tiers a pool's VMs mount.
_TIERS = "L"


def encode_tiers(profile: WorkloadProfile) -> list[str]:
    """``L=2:1:15:63:48:a:240``; nothing without ``checkpointTiers``."""
    tiers = profile.checkpoint_tiers
    if tiers is None:
        return []
    from spotgpu.models.tiers import ram_disk_gib, tier_commit_seconds, tier_load_seconds, tier_write_seconds

    b, n = profile.checkpoint_bytes, profile.nodes
    durable = "a" if tiers.durable_interval_seconds == "auto" else str(tiers.durable_interval_seconds)
    fields = (tiers.local.keep, tiers.peer_copies, f"{tier_write_seconds(tiers, b, n)[0]:.6g}",
              f"{tier_commit_seconds(tiers, b, n)[0]:.6g}", f"{tier_load_seconds(tiers, b, n)[0]:.6g}", durable,
              ram_disk_gib(tiers, b, n))  # fmt: skip
    return [f"{_TIERS}=" + ":".join(map(str, fields))]


def decode_tiers(text: str) -> dict[str, object] | None:
    """The workload tag's tier block as ``CheckpointTiers`` input; None when it has none."""
    for key, value in _split(text):
        if key != _TIERS:
            continue
        bits = value.split(":")
        if len(bits) != 7:
            raise ValueError(f"malformed checkpoint tiers {value!r}; expected keep:peers:write:commit:load:durable:ramGiB")
        keep, peers, write, commit, load, durable, ram = bits
        return {
            "local": {"keep": int(keep), "write_seconds": float(write), "commit_seconds": float(commit),
                      "load_seconds": float(load), "ram_disk_gib": float(ram)},
            "peer_copies": int(peers),
            "durable_interval_seconds": "auto" if durable == "a" else int(durable),
        }  # fmt: skip
    return None


def encode_workload(profile: WorkloadProfile) -> str:
    """``w=45;r=0.05;b=1800;...;p=2.2;o=5.67`` so a policy can rebuild the cost inputs from a tag.

    Omitted when unset (``d`` without a deadline). About 100 characters, and with a ``gpu`` block
    (:func:`encode_gpu`) still inside every cloud's limit, which is checked here (a
    :class:`~spotgpu.models.base.FieldProblem` below the workload).
    """
    parts = [f"{k}={getattr(profile, f):.12g}" for k, f in _WORKLOAD_FIELDS.items() if getattr(profile, f) is not None]
    parts += [f"{k}={getattr(profile.prices, f):.12g}" for k, f in _PRICE_FIELDS.items()]
    text = ";".join(parts + encode_gpu(profile) + encode_tiers(profile))
    if len(text) > TAG_VALUE_LIMIT:
        raise FieldProblem(
            f"makes the workload tag {len(text)} characters, above the {TAG_VALUE_LIMIT} a cloud tag holds",
            at="gpu.models", value=list(profile.gpu.models) if profile.gpu else None,
            fix="list fewer or shorter gpu.models (or gpu.relativeThroughput entries)",
        )
    return text


def _split(text: str) -> list[tuple[str, str]]:
    known = {*_WORKLOAD_FIELDS, *_PRICE_FIELDS, *_GPU_NUMBERS, *_GPU_LISTS, _GPU_SPEEDS, _TIERS}
    out = []
    for part in filter(None, text.split(";")):
        key, _, value = part.partition("=")
        if key not in known:
            raise ValueError(f"unknown workload tag field {key!r} in {text!r}")
        out.append((key, value))
    return out


def decode_workload(text: str) -> dict[str, float]:
    """Inverse of :func:`encode_workload`: ``{model field name: value}``; prices under their own names.

    The ``gpu`` block's fields are read by :func:`decode_gpu`, not here.
    """
    fields = {**_WORKLOAD_FIELDS, **_PRICE_FIELDS}
    return {fields[key]: float(value) for key, value in _split(text) if key in fields}


def decode_gpu_block(text: str) -> dict[str, object] | None:
    """The workload tag's ``gpu`` block as ``{GpuRequirement field: value}``; None when it has none."""
    block: dict[str, object] = {}
    for key, value in _split(text):
        if key in _GPU_NUMBERS:
            number = float(value)
            block[_GPU_NUMBERS[key]] = int(number) if key in ("c", "k") else number
        elif key in _GPU_LISTS:
            items = [v for v in value.split("+") if v]
            block[_GPU_LISTS[key]] = tuple(int(v) for v in items) if key == "a" else tuple(items)
        elif key == _GPU_SPEEDS:
            pairs = [item.rpartition(":") for item in value.split("+") if item]
            if any(not model or not sep for model, sep, _ in pairs):
                raise ValueError(f"malformed gpu speeds {value!r}; expected model:speed joined by +")
            block["relative_throughput"] = {model: float(speed) for model, _, speed in pairs}
    return block or None


def decode_gpu(text: str) -> GpuNeed | None:
    """The GPU need a workload tag states (what the policy pack judges each pool type against)."""
    block = decode_gpu_block(text)
    if block is None:
        return None
    from spotgpu.models.workload import GpuRequirement

    nodes = int(decode_workload(text).get("nodes", 1))
    return GpuRequirement.model_validate(block).need(nodes)


def workload_from_tag(text: str) -> WorkloadProfile:
    """Rebuild a WorkloadProfile from its tag (interval left as auto)."""
    values = decode_workload(text)
    prices = {f: values.pop(f) for f in list(values) if f in _PRICE_FIELDS.values()}
    ints = {"checkpoint_bytes", "nodes"}
    data: dict[str, object] = {k: (int(v) if k in ints else v) for k, v in values.items()}
    gpu = decode_gpu_block(text)
    if gpu is not None:
        data["gpu"] = gpu
    tiers = decode_tiers(text)
    if tiers is not None:
        data["checkpoint_tiers"] = tiers
    return WorkloadProfile.model_validate({**data, "prices": prices})


_LABEL_BAD = re.compile(r"[^a-z0-9_-]")


def gcp_label_value(value: str) -> str:
    """Squash a value into GCP's label alphabet (lowercase, digits, '_' and '-'; <= 63)."""
    return _LABEL_BAD.sub("_", value.lower())[:63]


def controller_waiver(controller: ControllerDeploySpec) -> str | None:
    """The stated reason a pool runs without the deployed controller job, if any."""
    return None if controller.enabled else controller.waiver


def pool_links(
    *,
    role: str,
    pool: str,
    checkpoint_store: str | None = None,
    fallback_group: str | None = None,
    ladder: FallbackLadder | None = None,
    workload: WorkloadProfile | None = None,
    checkpoint_interval_seconds: int | None = None,
    notice: str | None = None,
    waiver: str | None = None,
    controller_waiver: str | None = None,
    zones: tuple[str, ...] | None = None,
) -> dict[str, str]:
    """The tag map a pool resource carries; omitted links are left out, not blank."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {ROLES}")
    tags = {ROLE: role, POOL: pool}
    optional = {
        CHECKPOINT_STORE: checkpoint_store,
        FALLBACK_GROUP: fallback_group,
        LADDER: encode_ladder(ladder) if ladder else None,
        WORKLOAD: encode_workload(workload) if workload else None,
        CHECKPOINT_INTERVAL: str(checkpoint_interval_seconds) if checkpoint_interval_seconds else None,
        NOTICE: notice,
        WAIVER: waiver[:256] if waiver else None,
        CONTROLLER_WAIVER: controller_waiver[:256] if controller_waiver else None,
        ZONES: ",".join(zones)[:256] if zones else None,
    }
    tags.update({k: v for k, v in optional.items() if v})
    return tags
