"""``spotgpu drill aws --pool NAME``: run the pool's FIS spot-interruption drill and follow it.

The drill's template is created by ``spotgpu_pulumi.aws.InterruptionDrill`` and
tagged ``spotgpu-pool=<pool>``; this command finds it (or takes ``--template-id``),
starts an experiment, polls it to a terminal state and prints a timeline of
the experiment's and its action's state changes. Exit status: 0 when the
experiment completed, 1 when it failed, stopped, was cancelled or timed out,
2 when it could not start (no template, no credentials, no region).

``--dry-run`` reads the template (actions, targets, stop conditions) and resolves its
targets the way FIS would (resource type, tags or ARNs, path filters) with
``ec2:DescribeInstances``, then stops: no experiment is started.

boto3 is imported lazily: it is the ``aws`` extra, and the rest of the CLI must
work without it. Clock and sleep are injectable so tests run instantly.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from spotgpu.contract.tags import DRILL_ROLE, POOL, ROLE
from spotgpu.drills.common import DrillError, DrillFailed, DrillOutput, Outcome, add_drill_flags, finish, raising

#: FIS experiment states that never change again.
TERMINAL = frozenset({"completed", "stopped", "failed", "cancelled"})
DEFAULT_POLL_SECONDS = 10.0
#: The interruption lands PT2M..PT15M after the start; FIS then waits for the action to finish.
DEFAULT_TIMEOUT_SECONDS = 45 * 60


__all__ = ["DrillError", "DrillFailed", "plan_drill", "run_drill"]


@dataclass
class Timeline:
    """State changes seen while following one experiment, with seconds since the start."""

    events: list[tuple[float, str]] = field(default_factory=list)

    def add(self, elapsed: float, text: str) -> None:
        self.events.append((elapsed, text))

    def render(self) -> str:
        return "\n".join(f"  +{elapsed:7.1f}s  {text}" for elapsed, text in self.events)


@dataclass(frozen=True)
class DrillResult:
    experiment_id: str
    status: str
    reason: str
    timeline: Timeline

    @property
    def ok(self) -> bool:
        return self.status == "completed"


def _templates(fis: Any) -> Iterator[dict[str, Any]]:
    """Every experiment template in the region (follows nextToken)."""
    token: str | None = None
    while True:
        page = fis.list_experiment_templates(**({"nextToken": token} if token else {}))
        yield from page.get("experimentTemplates", [])
        token = page.get("nextToken")
        if not token:
            return


def _error_code(err: Exception) -> str:
    response = getattr(err, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def find_template(fis: Any, pool: str, template_id: str | None = None) -> str:
    """The pool's template id: ``template_id`` if it exists, else the one tagged with the pool."""
    if template_id:
        try:
            fis.get_experiment_template(id=template_id)
        except Exception as err:
            if _error_code(err) == "ResourceNotFoundException":
                raise DrillError(
                    f"--template-id {template_id}: no such FIS experiment template in this region; "
                    "fix: check the id in the stack output experimentTemplateId, or pass --region"
                ) from None
            raise
        return template_id
    matches = [t["id"] for t in _templates(fis) if (t.get("tags") or {}).get(POOL) == pool]
    if not matches:
        raise DrillError(
            f"--pool {pool}: no FIS experiment template tagged {POOL}={pool} in this region; "
            "fix: run `pulumi up` for the stack that defines the pool, pass --region, or pass --template-id"
        )
    if len(matches) > 1:
        raise DrillError(
            f"--pool {pool}: {len(matches)} templates are tagged {POOL}={pool} ({', '.join(sorted(matches))}); "
            "fix: pass --template-id"
        )
    return matches[0]


def start_experiment(fis: Any, template_id: str, pool: str) -> str:
    response = fis.start_experiment(
        clientToken=str(uuid.uuid4()),
        experimentTemplateId=template_id,
        tags={POOL: pool, ROLE: DRILL_ROLE},
    )
    return str(response["experiment"]["id"])


def follow(
    fis: Any,
    experiment_id: str,
    *,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_event: Callable[[float, str], None] | None = None,
) -> DrillResult:
    """Poll ``get_experiment`` until a terminal state or the timeout; record every change."""
    timeline = Timeline()
    seen: dict[str, tuple[str, str]] = {}
    start = clock()

    def note(key: str, status: str, reason: str, label: str) -> None:
        if seen.get(key) == (status, reason):
            return
        seen[key] = (status, reason)
        elapsed = clock() - start
        text = f"{label} {status}" + (f": {reason}" if reason else "")
        timeline.add(elapsed, text)
        if on_event:
            on_event(elapsed, text)

    while True:
        experiment = fis.get_experiment(id=experiment_id)["experiment"]
        state = experiment.get("state") or {}
        status, reason = str(state.get("status", "unknown")), str(state.get("reason", ""))
        note("experiment", status, reason, "experiment")
        for name, action in sorted((experiment.get("actions") or {}).items()):
            action_state = action.get("state") or {}
            note(
                f"action:{name}",
                str(action_state.get("status", "unknown")),
                str(action_state.get("reason", "")),
                f"action {name}",
            )
        if status in TERMINAL:
            return DrillResult(experiment_id, status, reason, timeline)
        if clock() - start >= timeout_seconds:
            note("timeout", "timed out", f"still {status} after {timeout_seconds:g} s", "drill")
            return DrillResult(experiment_id, "timeout", f"still {status} after {timeout_seconds:g} s", timeline)
        sleep(poll_seconds)


def resolved_targets(fis: Any, experiment_id: str) -> list[str]:
    """What FIS picked to interrupt (``target: instance ARN``), so the operator knows which node to watch."""
    found: list[str] = []
    token: str | None = None
    while True:
        page = fis.list_experiment_resolved_targets(
            experimentId=experiment_id, **({"nextToken": token} if token else {})
        )
        for target in page.get("resolvedTargets", []):
            info = target.get("targetInformation") or {}
            found.append(f"{target.get('targetName', '?')}: {', '.join(str(v) for v in info.values()) or '?'}")
        token = page.get("nextToken")
        if not token:
            return found


def _path_values(resource: Any, path: str) -> list[str]:
    """Values at a FIS filter path (``State.Name``) in a DescribeInstances record; lists fan out."""
    values = [resource]
    for part in path.split("."):
        step: list[Any] = []
        for value in values:
            item = value.get(part) if isinstance(value, dict) else None
            step.extend(item if isinstance(item, list) else [] if item is None else [item])
        values = step
    return [str(v) for v in values]


def _instance_id(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def resolve_target(ec2: Any, target: dict[str, Any]) -> list[str]:
    """The instance ids a FIS EC2 target would choose from now (before its selection mode).

    FIS semantics: ``resourceArns`` or ``resourceTags`` (all must match), then every path
    filter (any of its values matches). ``aws:ec2:spot-instance`` keeps Spot instances only.
    """
    resource_type = str(target.get("resourceType", ""))
    if resource_type not in ("aws:ec2:spot-instance", "aws:ec2:instance"):
        raise DrillError(f"target resource type {resource_type!r} is not an EC2 instance type; fix: check the template")
    if target.get("resourceArns"):
        request: dict[str, Any] = {"InstanceIds": [_instance_id(a) for a in target["resourceArns"]]}
    else:
        tags = target.get("resourceTags") or {}
        request = {"Filters": [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]}
    found = []
    for page in ec2.get_paginator("describe_instances").paginate(**request):
        for reservation in page.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if resource_type == "aws:ec2:spot-instance" and instance.get("InstanceLifecycle") != "spot":
                    continue
                wanted = target.get("filters") or []
                if all(set(_path_values(instance, f["path"])) & set(f.get("values", [])) for f in wanted):
                    found.append(str(instance["InstanceId"]))
    return sorted(found)


def plan_drill(
    fis: Any, pool: str, template_id: str | None = None, *, ec2: Any | None = None, out: Callable[[str], None] = print
) -> dict[str, Any]:
    """``--dry-run``: find and read the template and resolve its targets, with read-only calls only.

    Raises :class:`DrillError` when the real drill could not work: no template, a template
    without the spot-interruption action, or no instance its targets would pick.
    """
    template_id = find_template(fis, pool, template_id)
    template = fis.get_experiment_template(id=template_id)["experimentTemplate"]
    out(f"dry run: pool {pool}, template {template_id} ({template.get('description') or 'no description'})")
    out(f"  role {template.get('roleArn', '?')}")
    actions = template.get("actions") or {}
    for name, action in sorted(actions.items()):
        params = ", ".join(f"{k}={v}" for k, v in sorted((action.get("parameters") or {}).items()))
        out(f"  action {name}: {action.get('actionId')}" + (f" ({params})" if params else ""))
    if not any(a.get("actionId") == "aws:ec2:send-spot-instance-interruptions" for a in actions.values()):
        raise DrillError(
            f"template {template_id} has no aws:ec2:send-spot-instance-interruptions action; "
            "fix: pass the template the InterruptionDrill component created"
        )
    stops = [str(c.get("value") or c.get("source")) for c in template.get("stopConditions") or []]
    out(f"  stop conditions: {', '.join(stops) or 'none'}")
    targets: dict[str, Any] = {}
    for name, target in sorted((template.get("targets") or {}).items()):
        selection = target.get("selectionMode", "ALL")
        out(f"  target {name}: {target.get('resourceType')} {selection}")
        if ec2 is None:
            targets[name] = {"selectionMode": selection, "candidates": None}
            continue
        try:
            candidates = resolve_target(ec2, target)
        except Exception as err:
            if _error_code(err) not in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException"):
                raise
            out(f"    candidates: not resolved (ec2:DescribeInstances denied: {_error_code(err)})")
            targets[name] = {"selectionMode": selection, "candidates": None}
            continue
        targets[name] = {"selectionMode": selection, "candidates": candidates}
        out(f"    candidates now: {', '.join(candidates) or 'none'}")
        if not candidates:
            raise DrillError(
                f"target {name} of template {template_id} matches no running Spot instance now, so the "
                "experiment would fail with empty target resolution; fix: scale the pool's spot group up first"
            )
    out(f"dry run: would start an experiment from {template_id}; nothing was started")
    return {"templateId": template_id, "targets": targets}


def run_drill(
    fis: Any,
    pool: str,
    template_id: str | None = None,
    *,
    out: Callable[[str], None] = print,
    on_start: Callable[[str], None] | None = None,
    **follow_options: Any,
) -> DrillResult:
    """Find, start and follow one drill, printing as it goes."""
    template = find_template(fis, pool, template_id)
    experiment_id = start_experiment(fis, template, pool)
    if on_start:
        on_start(experiment_id)
    out(f"drill: pool {pool}, template {template}, experiment {experiment_id}")
    result = follow(fis, experiment_id, on_event=lambda t, text: out(f"  +{t:7.1f}s  {text}"), **follow_options)
    try:
        targets = resolved_targets(fis, experiment_id)
        out("targets: " + ("; ".join(targets) if targets else "none reported"))
    except Exception as err:  # best effort: the verdict does not depend on it
        out(f"targets: not available ({err})")
    verdict = "passed" if result.ok else "FAILED"
    out(
        f"drill {verdict}: experiment {experiment_id} {result.status}"
        + (f" ({result.reason})" if result.reason else "")
    )
    return result


def _body(args: argparse.Namespace, fis: Any, ec2: Any) -> Callable[[DrillOutput], Outcome]:
    def body(output: DrillOutput) -> Outcome:
        if args.dry_run:
            return "dry-run", "", plan_drill(fis, args.pool, args.template_id, ec2=ec2, out=output)

        def started(_experiment_id: str) -> None:
            output.started = True

        result = run_drill(
            fis,
            args.pool,
            args.template_id,
            out=output,
            on_start=started,
            poll_seconds=args.poll_seconds,
            timeout_seconds=args.timeout_seconds,
        )
        details = {
            "experimentId": result.experiment_id,
            "experimentStatus": result.status,
            "timeline": [{"seconds": round(t, 1), "event": text} for t, text in result.timeline.events],
        }
        return ("passed" if result.ok else "failed"), result.reason, details

    return body


def run(args: argparse.Namespace) -> int:
    output = DrillOutput("aws", args.pool, as_json=args.json, dry_run=args.dry_run)
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
    except ModuleNotFoundError as err:
        return finish(output, raising(err))
    try:
        fis = boto3.client("fis", region_name=args.region)
        ec2 = boto3.client("ec2", region_name=args.region) if args.dry_run else None
    except BotoCoreError as err:  # NoRegionError and kin
        return finish(output, raising(DrillError(f"{err}; fix: pass --region or set AWS_REGION")))
    return finish(
        output,
        _body(args, fis, ec2),
        sdk_errors=(BotoCoreError, ClientError),
        sdk_fix="check credentials, --region and the FIS permissions",
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "aws",
        help="interrupt Spot nodes of an AWS pool with its FIS template and follow the experiment",
        description="Start the pool's AWS FIS experiment template (tagged spotgpu-pool=NAME), "
        "follow it to the end and print a timeline. Exit 0 completed, 1 failed/stopped/timed out, 2 not started.",
    )
    add_drill_flags(
        p,
        pool_help="pool name (the spotgpu-pool tag)",
        poll_seconds=DEFAULT_POLL_SECONDS,
        timeout_seconds=DEFAULT_TIMEOUT_SECONDS,
        legacy=False,
    )
    p.add_argument("--region", default=None, help="AWS region (default: the AWS SDK's configured region)")
    p.add_argument("--template-id", default=None, help="experiment template id (default: find it by the pool tag)")
    p.set_defaults(func=run)
