"""``spotgpu controller``: run the fallback controller, once or as a loop.

    spotgpu controller validate --config controller.yaml
    spotgpu controller run --config controller.yaml --once      # one tick (scheduled function)
    spotgpu controller run --config controller.yaml             # long-lived loop
    spotgpu controller run --config controller.yaml --once --dry-run
    spotgpu controller status --config controller.yaml          # the saved record, as JSON
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import IO, Any

from spotgpu.config import ConfigError
from spotgpu.controller.actions import RemoveInstance, SetDesired
from spotgpu.controller.config import (
    AwsControlledPool,
    AzureControlledPool,
    ControllerConfig,
    GcpControlledPool,
    load_controller_config,
)
from spotgpu.controller.events import Event
from spotgpu.controller.observe import PoolObservation
from spotgpu.controller.runner import RECORD_KEY, CloudAdapter, Controller, describe_observe_error
from spotgpu.controller.store import ObjectJsonStore
from spotgpu.controller.telemetry import Telemetry


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
        return GcpPoolAdapter(pool, compute_v1.RegionInstanceGroupManagersClient(), pubsub)
    from azure.identity import DefaultAzureCredential
    from azure.mgmt.compute import ComputeManagementClient

    from spotgpu.controller.azure import AzurePoolAdapter

    return AzurePoolAdapter(pool, ComputeManagementClient(DefaultAzureCredential(), pool.subscription_id))


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


class _WouldPrinter(Telemetry):
    """A dry run's telemetry: each "would" action as one readable line on stdout (plus JSON lines)."""

    def emit(self, event: Event) -> None:
        super().emit(event)
        if event.kind == "would" and event.data.get("event") == "action":
            fields = {k: v for k, v in event.data.items() if k not in ("event", "action")}
            args = ", ".join(f"{k}={v!r}" for k, v in fields.items())
            print(f"dry-run: would {event.data['action']}({args})")


def _config(args: argparse.Namespace) -> ControllerConfig | None:
    try:
        return load_controller_config(args.config)
    except ConfigError as err:
        print(f"spotgpu controller: {err}", file=sys.stderr)
        return None


def _validate(args: argparse.Namespace) -> int:
    config = _config(args)
    if config is None:
        return 2
    for pool in config.pools:
        ladder = config.ladders[pool.ladder]
        steps = " -> ".join(f"{s.kind.value}({s.max_wait_seconds}s, ${s.cost_ceiling_per_hour:g}/h)" for s in ladder.steps)
        print(f"{pool.name} [{pool.cloud}] strategy={config.workloads[pool.workload].fallback_policy}: {steps}")
    return 0


def _run(args: argparse.Namespace) -> int:
    config = _config(args)
    if config is None:
        return 2
    spec = config.telemetry
    stream: IO[str] | None = None
    if spec.json_lines == "-":
        stream = sys.stdout
    elif spec.json_lines:
        stream = open(spec.json_lines, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    telemetry = (_WouldPrinter if args.dry_run else Telemetry)(json_lines=stream)
    if spec.prometheus_port and not args.once:
        from prometheus_client import start_http_server

        start_http_server(spec.prometheus_port, addr=spec.prometheus_addr, registry=telemetry.registry)
    adapters: dict[str, Any] = {}
    for pool in config.pools:
        adapter = build_adapter(pool, peek=args.dry_run)
        adapters[pool.name] = DryRun(adapter) if args.dry_run else adapter
    store = ObjectJsonStore(config.state_url)
    controller = Controller(config, adapters, store, telemetry, dry_run=args.dry_run)
    prefix = "spotgpu controller" + (" (dry run)" if args.dry_run else "")
    try:
        results = controller.tick(time.time())
    except Exception as err:  # the record's store: unreadable, unreachable, refused
        print(f"{prefix}: cannot read or write the record at {config.state_url}: {describe_observe_error(err)}",
              file=sys.stderr)  # fmt: skip
        return 1
    if controller.unobserved:
        for name, why in sorted(controller.unobserved.items()):
            print(f"{prefix}: cannot observe pool {name}: {why}", file=sys.stderr)
        return 1
    if args.once or args.dry_run:
        for name, result in results.items():
            step = result.step.kind.value if result.step else "whole"
            verb = "would take" if args.dry_run else ""
            print(f"{name}: {step}, {verb + ' ' if verb else ''}{len(result.actions)} action(s)")
        return 0
    controller.run()
    return 0


def _status(args: argparse.Namespace) -> int:
    config = _config(args)
    if config is None:
        return 2
    doc = ObjectJsonStore(config.state_url).get(RECORD_KEY)
    print(json.dumps(doc or {"pools": {}}, indent=2, sort_keys=True))
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("controller", help="Run the fallback controller (the replacement ladder).")
    sub = parser.add_subparsers(dest="controller_command", metavar="ACTION", required=True)
    for name, func, help_text in (
        ("validate", _validate, "Check a controller config file and print each pool's ladder."),
        ("run", _run, "Reconcile every pool: once (--once) or every tickSeconds."),
        ("status", _status, "Print the controller's saved record."),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--config", required=True, help="controller config file (YAML or JSON)")
        if name == "run":
            p.add_argument("--once", action="store_true", help="one tick, then exit (for a scheduled function)")
            p.add_argument(
                "--dry-run", action="store_true",
                help="one tick: observe, print what would be done; writes nothing (no record, drains, markers)",
            )  # fmt: skip
        p.set_defaults(func=func)
