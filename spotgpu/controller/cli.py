"""``spotgpu controller``: run the fallback controller, once or as a loop.

    spotgpu controller validate --config controller.yaml
    spotgpu controller run --config controller.yaml --once      # one tick (scheduled function)
    spotgpu controller run --config controller.yaml             # long-lived loop
    spotgpu controller run --config controller.yaml --once --dry-run
    spotgpu controller status --config controller.yaml          # a summary of the saved record
    spotgpu controller status --config controller.yaml --json   # the saved record, as JSON
    spotgpu controller config --stack prod [--pool NAME]        # the config the stack deployed, as YAML
    spotgpu controller package [--out dist/spotgpu-controller-lambda.zip]   # the AWS Lambda zip
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import IO, Any

from spotgpu.cliutil import STACK, add_json_flag, camel_keys, print_json
from spotgpu.config import ConfigError
from spotgpu.contract.controller_events import ActionTaken, ControllerEventKind, Event, Would
from spotgpu.contract.state_store import ObjectJsonStore
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.config import (
    AwsControlledPool,
    AzureControlledPool,
    ControllerConfig,
    GcpControlledPool,
    load_controller_config,
)
from spotgpu.controller.lease import Lease, LeaseLost
from spotgpu.controller.observe import PoolObservation
from spotgpu.controller.runner import RECORD_KEY, CloudAdapter, Controller, describe_observe_error
from spotgpu.controller.state import RECORD_VERSION, ControllerRecord
from spotgpu.controller.telemetry import ControllerTelemetry


def build_adapter(pool: AwsControlledPool | GcpControlledPool | AzureControlledPool, *, peek: bool = False) -> CloudAdapter:
    """Real cloud clients, imported only for the clouds a config uses (``peek``: leave queued events visible)."""
    if isinstance(pool, AwsControlledPool):
        import boto3

        from spotgpu.controller.aws import AwsPoolAdapter

        sqs = boto3.client("sqs", region_name=pool.region) if pool.queue_url else None
        ec2 = boto3.client("ec2", region_name=pool.region)
        return AwsPoolAdapter(pool, boto3.client("autoscaling", region_name=pool.region), sqs, ec2, peek=peek)
    if isinstance(pool, GcpControlledPool):
        from google.cloud import compute_v1

        from spotgpu.controller.gcp import GcpPoolAdapter, GooglePubSubSource

        pubsub = GooglePubSubSource(pool.subscription) if pool.subscription else None
        return GcpPoolAdapter(pool, compute_v1.RegionInstanceGroupManagersClient(), pubsub, peek=peek)
    from azure.identity import DefaultAzureCredential
    from azure.mgmt.compute import ComputeManagementClient

    from spotgpu.controller.azure import AzurePoolAdapter, StorageQueueSource

    credential = DefaultAzureCredential()
    events = StorageQueueSource(pool.events_queue_url, credential) if pool.events_queue_url else None
    return AzurePoolAdapter(pool, ComputeManagementClient(credential, pool.subscription_id), events, peek=peek)


class DryRun:
    """Belt and braces around a dry run's adapters: observe for real, never apply, never acknowledge."""

    def __init__(self, inner: CloudAdapter) -> None:
        self.inner = inner

    def observe(self, now: float) -> PoolObservation:
        return self.inner.observe(now)

    def apply(self, action: SetDesired | RemoveInstance) -> None:
        raise RuntimeError(f"dry run reached the cloud with {action}; this is a bug")

    def ack(self, receipts: tuple[object, ...]) -> None:
        return None


class _WouldPrinter(ControllerTelemetry):
    """A dry run's telemetry: each "would" action as one readable line (plus JSON lines).

    The lines go to stdout, or to stderr under ``--json`` (stdout then holds one JSON document).
    """

    would_stream: IO[str] | None = None

    def emit(self, event: Event) -> None:
        super().emit(event)
        if isinstance(event.fields, Would) and event.fields.event is ControllerEventKind.ACTION:
            action = ActionTaken.from_fields(event.fields.detail)
            args = ", ".join(f"{k}={v!r}" for k, v in action.detail.items())
            print(f"dry-run: would {action.action}({args})", file=self.would_stream or sys.stdout)


def _config(args: argparse.Namespace) -> ControllerConfig | None:
    """``--config FILE``, or ``--config env:NAME`` for the JSON a deployed job carries in its environment."""
    try:
        if args.config.startswith("env:"):
            import os

            from spotgpu.controller.config import parse_controller_config

            name = args.config[4:]
            if not os.environ.get(name):
                raise ConfigError(f"--config {args.config}: ${name} is empty; fix: set it to the rendered config JSON")
            return parse_controller_config(json.loads(os.environ[name]))
        return load_controller_config(args.config)
    except ConfigError as err:
        print(f"spotgpu controller: {err}", file=sys.stderr)
        return None


def _validate(args: argparse.Namespace) -> int:
    config = _config(args)
    if config is None:
        return 2
    pools = []
    for pool in config.pools:
        ladder = config.ladders[pool.ladder]
        strategy = config.workloads[pool.workload].fallback_policy
        steps = [{"kind": s.kind.value, "maxWaitSeconds": s.max_wait_seconds, s.ceiling_key: s.ceiling,
                  "ceiling": s.describe_ceiling()} for s in ladder.steps]  # fmt: skip
        pools.append({"pool": pool.name, "cloud": pool.cloud, "strategy": str(strategy), "ladder": pool.ladder, "steps": steps})
        if not args.json:
            text = " -> ".join(f"{s['kind']}({s['maxWaitSeconds']}s, {s['ceiling']})" for s in steps)
            print(f"{pool.name} [{pool.cloud}] strategy={strategy}: {text}")
    if args.json:
        print_json({"valid": True, "pools": pools})
    return 0


def _action_doc(action: object) -> dict[str, Any]:
    """One planned action as JSON: its type and its fields."""
    fields = dataclasses.asdict(action) if dataclasses.is_dataclass(action) and not isinstance(action, type) else {}
    return {"action": type(action).__name__, **fields}


def _run(args: argparse.Namespace) -> int:
    config = _config(args)
    if config is None:
        return 2
    spec = config.telemetry
    report = args.json and (args.once or args.dry_run)  # one JSON document on stdout: nothing else goes there
    stream: IO[str] | None = None
    if spec.json_lines == "-":
        stream = sys.stderr if report else sys.stdout
    elif spec.json_lines:
        stream = open(spec.json_lines, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    telemetry = (_WouldPrinter if args.dry_run else ControllerTelemetry)(json_lines=stream)
    if isinstance(telemetry, _WouldPrinter) and report:
        telemetry.would_stream = sys.stderr
    if spec.prometheus_port and not args.once:
        from prometheus_client import start_http_server

        start_http_server(spec.prometheus_port, addr=spec.prometheus_addr, registry=telemetry.registry)
    adapters: dict[str, Any] = {}
    for pool in config.pools:
        adapter = build_adapter(pool, peek=args.dry_run)
        adapters[pool.name] = DryRun(adapter) if args.dry_run else adapter
    store = ObjectJsonStore(config.state_url)
    # A dry run takes no lease: taking one is a write, and a dry run writes nothing.
    lease = None if args.dry_run else Lease(store, config.lease_ttl_seconds, config.lease.max_clock_skew_seconds)
    controller = Controller(config, adapters, store, telemetry, dry_run=args.dry_run, lease=lease)
    prefix = "spotgpu controller" + (" (dry run)" if args.dry_run else "")
    if args.once or args.dry_run:
        try:
            results = controller.tick(time.time())
        except LeaseLost as err:  # fenced out or past the lease deadline mid-tick; nothing more was written
            print(f"{prefix}: {err}", file=sys.stderr)
            return 1
        except Exception as err:  # the record's store: unreadable, unreachable, refused
            print(f"{prefix}: cannot read or write the record at {config.state_url}: {describe_observe_error(err)}",
                  file=sys.stderr)  # fmt: skip
            return 1
        finally:
            if lease is not None:
                lease.release()  # the next scheduled run need not wait for expiry
        verdict = controller.lease_verdict
        if verdict is not None and not verdict.held:
            print(f"{prefix}: {verdict.reason}", file=sys.stderr)
        if controller.unobserved:
            for name, why in sorted(controller.unobserved.items()):
                print(f"{prefix}: cannot observe pool {name}: {why}", file=sys.stderr)
        if report:
            pools = {name: {"step": result.step.kind.value if result.step else "whole",
                            "actions": [_action_doc(a) for a in result.actions]}
                     for name, result in results.items()}  # fmt: skip
            print_json({"dryRun": bool(args.dry_run), "pools": pools,
                        "unobserved": dict(sorted(controller.unobserved.items()))})  # fmt: skip
        if controller.unobserved:
            return 1
        if report:
            return 0
        for name, result in results.items():
            step = result.step.kind.value if result.step else "whole"
            verb = "would take" if args.dry_run else ""
            print(f"{name}: {step}, {verb + ' ' if verb else ''}{len(result.actions)} action(s)")
        return 0
    try:
        controller.run()
    finally:
        if lease is not None:
            lease.release()
    return 0


#: Keys of the saved record that map names (pools, VM ids, groups) to values: kept as written.
RECORD_NAMES = ("pools", "drains", "backoff")


def _status(args: argparse.Namespace) -> int:
    config = _config(args)
    if config is None:
        return 2
    doc = ObjectJsonStore(config.state_url).get(RECORD_KEY) or {"pools": {}}
    if args.json:  # camelCase like every --json
        shown = camel_keys(doc, names_under=RECORD_NAMES)
        print(json.dumps(shown, indent=2, sort_keys=True))
        return 0
    try:
        ControllerRecord.from_doc(doc if "version" in doc else {**doc, "version": RECORD_VERSION})
    except ValueError as err:
        print(f"spotgpu controller status: the record at {config.state_url} cannot be read: {err}", file=sys.stderr)
        return 2
    pools = doc.get("pools") or {}
    if not pools:
        print(f"no record yet at {config.state_url} (the controller has not ticked)")
    for name, state in sorted(pools.items()):
        print(_status_line(name, state if isinstance(state, dict) else {}))
    return 0


def _status_line(name: str, state: dict[str, Any]) -> str:
    """One pool of the record for a human: whole or lost, the ladder step, fallback spend, last tick."""

    def ago(at: Any) -> str:
        return f"{max(0.0, time.time() - float(at)):.0f}s ago" if isinstance(at, (int, float)) else "never"

    health = f"capacity lost since {ago(state['lost_since'])}" if state.get("lost_since") is not None else "whole"
    parts = [health, f"step {state.get('step_index', 0)}", f"{len(state.get('drains') or {})} draining",
             f"fallback ${float(state.get('fallback_cost_usd') or 0.0):.2f}", f"last tick {ago(state.get('last_tick'))}"]  # fmt: skip
    return f"{name}: " + ", ".join(parts)


def stack_controller_configs(outputs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{pool: config document}`` from a stack's outputs (each pool exports ``controllerConfig``, a JSON string)."""
    found: dict[str, dict[str, Any]] = {}
    for pool, exports in sorted(outputs.items()):
        if isinstance(exports, dict) and exports.get("controllerConfig"):
            raw = exports["controllerConfig"]
            found[pool] = json.loads(raw) if isinstance(raw, str) else raw
    return found


def _stack_outputs(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.outputs:
        try:
            with open(args.outputs, encoding="utf-8") as fh:
                return dict(json.load(fh))
        except (OSError, ValueError) as err:
            print(f"spotgpu controller config: --outputs {args.outputs}: {err}; fix: pass the file written by "
                  "`pulumi stack output --json --show-secrets`", file=sys.stderr)
            return None
    import shutil
    import subprocess

    if shutil.which("pulumi") is None:
        print("spotgpu controller config: no pulumi CLI on PATH; fix: install it, or pass --outputs FILE from "
              "`pulumi stack output --json --show-secrets -s STACK`", file=sys.stderr)
        return None
    done = subprocess.run(
        ["pulumi", "stack", "output", "--json", "--show-secrets", "-s", args.stack],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        print(f"spotgpu controller config: pulumi stack output -s {args.stack} failed: {done.stderr.strip()[-300:]}",
              file=sys.stderr)
        return None
    return dict(json.loads(done.stdout))


def _config_cmd(args: argparse.Namespace) -> int:
    import yaml

    from spotgpu.controller.config import parse_controller_config

    outputs = _stack_outputs(args)
    if outputs is None:
        return 2
    configs = stack_controller_configs(outputs)
    if args.pool:
        if args.pool not in configs:
            print(f"spotgpu controller config: stack {args.stack} has no controller config for pool {args.pool!r}; "
                  f"fix: use one of {sorted(configs)}", file=sys.stderr)
            return 2
        configs = {args.pool: configs[args.pool]}
    if not configs:
        print(f"spotgpu controller config: stack {args.stack} exports no controllerConfig; fix: `pulumi up` a "
              "version of the stack that deploys the controller", file=sys.stderr)
        return 2
    docs = []
    for pool, doc in configs.items():
        try:
            parse_controller_config(doc)  # what the stack exported must still validate here
        except ConfigError as err:
            print(f"spotgpu controller config: pool {pool}: {err}", file=sys.stderr)
            return 2
        docs.append(doc)
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2, sort_keys=True))
    else:
        print(yaml.safe_dump_all(docs, sort_keys=False), end="")
    return 0


def _package_cmd(args: argparse.Namespace) -> int:
    from pathlib import Path

    from spotgpu.controller.package import HANDLER, PackageError, build_package

    try:
        count = build_package(Path(args.out), args.architecture, args.source, args.requirement)
    except PackageError as err:
        print(f"spotgpu controller package: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"out": args.out, "files": count, "handler": HANDLER, "architecture": args.architecture}))
    else:
        print(f"{args.out}: {count} files, handler {HANDLER}, {args.architecture}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("controller", help="Run the fallback controller (the replacement ladder).")
    sub = parser.add_subparsers(dest="controller_command", metavar="ACTION", required=True)
    for name, func, help_text in (
        ("validate", _validate, "Check a controller config file and print each pool's ladder."),
        ("run", _run, "Reconcile every pool: once (--once) or every tickSeconds."),
        ("status", _status, "Print a summary of the controller's saved record (--json: the record)."),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--config", required=True, help="controller config file (YAML or JSON), or env:VARIABLE")
        add_json_flag(p, {"validate": "each pool's ladder", "run": "the tick's per-pool results (with --once or --dry-run)",
                          "status": "the saved record"}[name])  # fmt: skip
        if name == "run":
            p.add_argument("--once", action="store_true", help="one tick, then exit (for a scheduled function)")
            p.add_argument(
                "--dry-run", action="store_true",
                help="one tick: observe, print what would be done; writes nothing (no record, drains, markers)",
            )  # fmt: skip
        p.set_defaults(func=func)
    cfg = sub.add_parser("config", help="Print the controller config a stack deployed (for a long-lived process).")
    cfg.add_argument("--stack", "-s", required=True, type=STACK, help="stack name")
    cfg.add_argument("--pool", help="one pool (default: every pool, one YAML document each)")
    cfg.add_argument("--outputs", help="a saved `pulumi stack output --json --show-secrets` file instead of the CLI")
    add_json_flag(cfg, "the config (one object, or a list for several pools) instead of YAML")
    cfg.set_defaults(func=_config_cmd)
    pkg = sub.add_parser("package", help="Build the AWS Lambda zip of the controller (no Pulumi SDK inside).")
    pkg.add_argument("--out", default="dist/spotgpu-controller-lambda.zip", help="zip to write")
    pkg.add_argument("--architecture", choices=("x86_64", "arm64"), default="x86_64", help="Lambda CPU architecture")
    pkg.add_argument("--source", choices=("pip", "env"), default="pip",
                     help="pip: install for the Lambda platform (needs the index); env: copy this environment")
    pkg.add_argument("--requirement", help="what pip installs (default spotgpu[aws]==VERSION)")
    add_json_flag(pkg, "the zip's path, file count, handler and architecture")
    pkg.set_defaults(func=_package_cmd)
