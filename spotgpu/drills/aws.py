"""``spotgpu drill aws --pool NAME``: run the pool's FIS spot-interruption drill and follow it.

The drill's template is created by ``spotgpu_pulumi.aws.InterruptionDrill`` and
tagged ``spotgpu-pool=<pool>``; this command finds it (or takes ``--template-id``),
starts an experiment, polls it to a terminal state and prints a timeline of
the experiment's and its action's state changes. Exit status: 0 when the
experiment completed, 1 when it failed, stopped, was cancelled or timed out,
2 when it could not start (no template, no credentials, no region).

boto3 is imported lazily: it is the ``aws`` extra, and the rest of the CLI must
work without it. Clock and sleep are injectable so tests run instantly.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from spotgpu.tags import POOL

#: FIS experiment states that never change again.
TERMINAL = frozenset({"completed", "stopped", "failed", "cancelled"})
DEFAULT_POLL_SECONDS = 10.0
#: The interruption lands PT2M..PT15M after the start; FIS then waits for the action to finish.
DEFAULT_TIMEOUT_SECONDS = 45 * 60


class DrillError(Exception):
    """The drill could not start; the message says what to fix."""


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
        tags={POOL: pool, "spotgpu-role": "drill"},
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


def run_drill(
    fis: Any,
    pool: str,
    template_id: str | None = None,
    *,
    out: Callable[[str], None] = print,
    **follow_options: Any,
) -> DrillResult:
    """Find, start and follow one drill, printing as it goes."""
    template = find_template(fis, pool, template_id)
    experiment_id = start_experiment(fis, template, pool)
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


def run(args: argparse.Namespace) -> int:
    try:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError
    except ModuleNotFoundError as err:
        print(f"spotgpu drill aws: needs {err.name}; fix: pip install 'spotgpu[aws]'", file=sys.stderr)
        return 2
    try:
        fis = boto3.client("fis", region_name=args.region)
        result = run_drill(
            fis, args.pool, args.template_id, poll_seconds=args.poll_seconds, timeout_seconds=args.timeout
        )
    except DrillError as err:
        print(f"spotgpu drill aws: {err}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as err:
        print(f"spotgpu drill aws: {err}; fix: check credentials, --region and the FIS permissions", file=sys.stderr)
        return 2
    return 0 if result.ok else 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "aws",
        help="interrupt Spot nodes of an AWS pool with its FIS template and follow the experiment",
        description="Start the pool's AWS FIS experiment template (tagged spotgpu-pool=NAME), "
        "follow it to the end and print a timeline. Exit 0 completed, 1 failed/stopped/timed out, 2 not started.",
    )
    p.add_argument("--pool", required=True, help="pool name (the spotgpu-pool tag)")
    p.add_argument("--region", default=None, help="AWS region (default: the AWS SDK's configured region)")
    p.add_argument("--template-id", default=None, help="experiment template id (default: find it by the pool tag)")
    p.add_argument("--poll-seconds", type=float, default=DEFAULT_POLL_SECONDS, help="seconds between status polls")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="give up after this many seconds")
    p.set_defaults(func=run)
