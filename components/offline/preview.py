"""``spotgpu preview``: the offline preview of a stack, as a reviewer reads it.

It runs the stack program under the mock runtime, then prints the resource tree
(grouped by cloud, with counts), the policy pack's verdicts (exit 1 on any
mandatory violation) and the economics of each pool. ``--json`` prints one
document for CI to diff.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotgpu.catalogue import CLOUDS
from spotgpu.cliutil import camel_keys
from spotgpu.models import StackConfig
from spotgpu_pulumi.clouds import StackPlan, reuse_plans
from spotgpu_pulumi.offline.mocks import UNKNOWN, RecordedResource
from spotgpu_pulumi.offline.program import Recording, engine_config, load_project, run_program
from spotgpu_pulumi.offline.waivers import Waiver, waivers_in_force

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Keys of the economics section whose mappings are keyed by names (pools, GPU models), not by our keys.
ECONOMICS_NAMES = ("pools", "relativeThroughputInUse")
CLOUD_TITLES = {"aws": "AWS", "gcp": "Google Cloud", "azure": "Azure", "other": "Other"}


@dataclass
class Violation:
    policy: str
    level: str  # "mandatory" | "advisory"
    urn: str
    message: str


@dataclass
class PreviewResult:
    recording: Recording
    violations: list[Violation] = field(default_factory=list)
    economics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: stated exceptions in force (policy config, stack config, resource links): shown next to the verdicts
    waivers: list[Waiver] = field(default_factory=list)

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.level == "mandatory"]


def _clean(value: Any) -> Any:
    """Unknowns shown as such, mapping keys sorted: the document must not depend on registration order."""
    if value == UNKNOWN:
        return "(unknown)"
    if isinstance(value, dict):
        return {k: _clean(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def run_preview(
    project_dir: Path,
    stack: str,
    policy_pack: Path | None = None,
    policy_config: Path | None = None,
    stack_plan: StackPlan | None = None,
) -> PreviewResult:
    """Run the program and judge it; ``stack_plan`` is the stack as already validated and planned
    (``check_config``): the program builds from those plans instead of planning each pool again."""
    with reuse_plans(stack_plan):
        recording = run_program(project_dir, stack)
    result = PreviewResult(recording)
    resolved = None
    if policy_pack is not None:
        from spotgpu_pulumi.offline.policy_harness import analyze_with, load_pack, read_config, resolve_config

        pack, config = load_pack(Path(policy_pack)), read_config(policy_config)
        resolved = resolve_config(pack, config)
        result.violations = [Violation(**v) for v in analyze_with(recording.resources, pack, config)]
    stack_config = _stack_config(project_dir, stack)
    result.economics = _economics(stack_config)
    result.waivers = waivers_in_force(recording.resources, resolved, stack_config)
    return result


def _stack_config(project_dir: Path, stack: str) -> StackConfig | None:
    """The stack's spotgpu config as the program reads it, or None (no spotgpu keys, or a config error
    the program itself reports).

    The keys are found in the ``spotgpu:`` namespace, else in the one namespace
    that declares ``pools`` (a program may name its own, ``load_config("ml")``),
    whatever the project is called.
    """
    from spotgpu.config import ConfigError, stack_config_from_engine
    from spotgpu.project import stack_namespace

    project = load_project(project_dir)
    engine = engine_config(project, stack)
    namespace = stack_namespace(engine)
    if namespace is None:
        return None
    try:  # the program's own read (clouds selection and provider regions included), not a second one
        config = stack_config_from_engine(engine, namespace, str(project_dir))
    except ConfigError:  # the program itself reports it; a preview of it has no economics to show
        return None
    return config


def _economics(config: StackConfig | None) -> dict[str, Any]:
    """Per-pool cost and spot eligibility, for stacks that carry spotgpu config."""
    if config is None:
        return {}
    from spotgpu.simulation.check import checked_economics

    report, _seconds = checked_economics(config)  # the model's verdict held up against the replay (cost --stack's too)
    return report


def to_document(result: PreviewResult) -> dict[str, Any]:
    """The preview as one JSON-ready document, byte-stable across runs for CI diffs.

    Registration order depends on when each Output resolves, so resources are
    sorted by URN and violations by (policy, URN, message); every mapping is
    key-sorted. ``outputs`` are the stack outputs, as ``pulumi stack output`` shows them.
    """
    rec = result.recording
    violations = sorted(result.violations, key=lambda v: (v.policy, v.urn, v.level, v.message))
    return {
        "stack": rec.stack,
        "project": rec.project,
        "resources": [
            {"urn": r.urn, "type": r.type, "name": r.name, "parent": r.parent, "inputs": _clean(r.inputs)}
            for r in sorted(rec.resources, key=lambda r: r.urn)
        ],
        "outputs": _clean(rec.outputs),
        "policy": {"violations": [v.__dict__ for v in violations], "waivers": [w.document() for w in result.waivers]},
        "economics": camel_keys(result.economics, names_under=ECONOMICS_NAMES),
    }


def render_tree(resources: list[RecordedResource]) -> str:
    children: dict[str, list[RecordedResource]] = defaultdict(list)
    urns = {r.urn for r in resources}
    roots: list[RecordedResource] = []
    for r in sorted(resources, key=lambda r: r.urn):  # stable order, whatever resolved first
        if r.type == "pulumi:pulumi:Stack":
            continue
        if r.parent in urns and not r.parent.endswith("pulumi:pulumi:Stack::" + r.parent.split("::")[-1]):
            children[r.parent].append(r)
        else:
            roots.append(r)
    lines: list[str] = []
    by_cloud: dict[str, list[RecordedResource]] = defaultdict(list)
    for r in roots:
        by_cloud[r.cloud].append(r)
    counts = Counter(r.cloud for r in resources if r.type != "pulumi:pulumi:Stack")
    custom_counts = Counter(r.cloud for r in resources if r.custom)

    def walk(node: RecordedResource, prefix: str, last: bool) -> None:
        branch = "└─ " if last else "├─ "
        kind = "" if node.custom else "  [component]"
        lines.append(f"{prefix}{branch}{node.name}  {node.type}{kind}")
        kids = children.get(node.urn, [])
        for i, kid in enumerate(kids):
            walk(kid, prefix + ("   " if last else "│  "), i == len(kids) - 1)

    for cloud in (*CLOUDS, "other"):
        nodes = by_cloud.get(cloud)
        if not nodes:
            continue
        lines.append(
            f"{CLOUD_TITLES[cloud]}: {counts[cloud]} resources "
            f"({custom_counts[cloud]} cloud resources, {counts[cloud] - custom_counts[cloud]} components)"
        )
        for i, node in enumerate(nodes):
            walk(node, "", i == len(nodes) - 1)
        lines.append("")
    return "\n".join(lines)


def render_text(result: PreviewResult) -> str:
    rec = result.recording
    below = sum(1 for r in rec.resources if r.type != "pulumi:pulumi:Stack")
    total = len(rec.resources)  # what `--json` lists, the stack resource included
    out = [f"Offline preview of stack {rec.stack!r} (project {rec.project}): {total} resources "
           f"(the stack and {below} below it)", ""]  # fmt: skip
    out.append(render_tree(rec.resources))
    out.append("Policy verdicts:")
    if not result.violations:
        inforce = f" ({len(result.waivers)} waiver(s) in force, below)" if result.waivers else ""
        out.append(f"  no violations{inforce}")
    for v in sorted(result.violations, key=lambda v: (v.level != "mandatory", v.policy, v.urn)):
        name = v.urn.split("::")[-1] if v.urn else "(stack)"
        out.append(f"  [{v.level}] {v.policy} on {name}: {v.message}")
    out.append("")
    if result.waivers:
        out.append("Waivers in force (withdraw one by removing its key):")
        out.extend(w.line() for w in result.waivers)
        out.append("")
    if result.economics:
        from spotgpu.economics.report import render_economics

        out.append(render_economics(result.economics))
    out.extend(result.notes)
    return "\n".join(out)
