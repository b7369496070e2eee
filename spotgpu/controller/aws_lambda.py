"""AWS Lambda entry point: one controller tick per invocation (``spotgpu controller run --once``).

Two things invoke it:

* the EventBridge Scheduler schedule, every ``controller.scheduleMinutes``
  (the payload is the schedule's fixed input, ``{"source": "spotgpu.schedule"}``);
* the pool's SQS queue, through an event source mapping, so an interruption
  warning starts a tick at once instead of at the next minute. Lambda has
  already received those messages, so the handler hands them to the AWS adapter
  as the first "receive", and deletes them itself only after the record is
  saved, like any other tick. A tick that could not take the lease reports every
  record as a batch item failure: the messages go back on the queue, nothing is
  lost.

The config is the JSON the stack rendered (``spotgpu.controller.render``), in the
``SPOTGPU_CONTROLLER_CONFIG`` environment variable. Reserved concurrency 1 keeps
invocations serial; the lease makes a second writer harmless anyway.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from spotgpu.config import ConfigError
from spotgpu.contract.state_store import ObjectJsonStore
from spotgpu.controller.config import ControllerConfig, parse_controller_config
from spotgpu.controller.lease import Lease, LeaseLost
from spotgpu.controller.render import CONFIG_ENV
from spotgpu.controller.runner import CloudAdapter, Controller
from spotgpu.controller.telemetry import ControllerTelemetry

#: Test and emulator hook: an endpoint URL for every boto3 client and for the S3 state store.
ENDPOINT_ENV = "SPOTGPU_AWS_ENDPOINT_URL"


class EventFirstSqs:
    """An SQS client whose first ``receive_message`` returns the messages Lambda delivered in the event."""

    def __init__(self, inner: Any, records: list[dict[str, Any]]) -> None:
        self.inner = inner
        # Lambda's record carries SQS's system attributes (SentTimestamp: the receive time of an
        # event without a usable time of its own).
        self.pending = [
            {"MessageId": r["messageId"], "ReceiptHandle": r["receiptHandle"], "Body": r["body"],
             "Attributes": dict(r.get("attributes") or {})}
            for r in records
        ]  # fmt: skip
        self.deleted: set[str] = set()

    def receive_message(self, **kwargs: Any) -> dict[str, Any]:
        if self.pending:
            batch, self.pending = self.pending[:10], self.pending[10:]
            return {"Messages": batch}
        return dict(self.inner.receive_message(**kwargs))

    def delete_message_batch(self, **kwargs: Any) -> Any:
        result = self.inner.delete_message_batch(**kwargs)
        self.deleted.update(str(e["ReceiptHandle"]) for e in kwargs.get("Entries", []))
        return result


def sqs_records(event: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in event.get("Records", []) if r.get("eventSource") == "aws:sqs"]


def _clients(
    config: ControllerConfig, records: list[dict[str, Any]], shims: list[EventFirstSqs]
) -> dict[str, CloudAdapter]:
    import boto3

    from spotgpu.controller.aws import AwsPoolAdapter
    from spotgpu.controller.config import AwsControlledPool

    endpoint = os.environ.get(ENDPOINT_ENV) or None
    adapters: dict[str, CloudAdapter] = {}
    for pool in config.pools:
        if not isinstance(pool, AwsControlledPool):
            raise ValueError(f"pool {pool.name} is cloud {pool.cloud}; the Lambda controller runs AWS pools only")

        def client(service: str, region: str = pool.region) -> Any:
            return boto3.client(service, region_name=region, endpoint_url=endpoint)

        sqs: Any = client("sqs") if pool.queue_url else None
        if sqs is not None and records:
            sqs = EventFirstSqs(sqs, records)
            shims.append(sqs)
        adapters[pool.name] = AwsPoolAdapter(pool, client("autoscaling"), sqs, client("ec2"))
    return adapters


def _store(config: ControllerConfig) -> ObjectJsonStore:
    endpoint = os.environ.get(ENDPOINT_ENV)
    if endpoint and config.state_url.startswith("s3://"):
        return ObjectJsonStore(config.state_url, endpoint=endpoint, client_options={"allow_http": True})
    return ObjectJsonStore(config.state_url)


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """One tick. For SQS events, ``batchItemFailures`` lists the messages the tick did not acknowledge."""
    try:
        config = parse_controller_config(json.loads(os.environ.get(CONFIG_ENV) or "null") or {})
    except (ConfigError, ValueError) as err:  # one line in the function's log, not a traceback
        raise RuntimeError(f"${CONFIG_ENV}: {err}; fix: redeploy the stack (it renders this config)") from None
    records = sqs_records(event)
    store = _store(config)
    lease = Lease(store, config.lease_ttl_seconds, config.lease.max_clock_skew_seconds)
    shims: list[EventFirstSqs] = []
    adapters = _clients(config, records, shims)
    controller = Controller(config, adapters, store, ControllerTelemetry(json_lines=sys.stdout), lease=lease)
    lost = ""
    try:
        results = controller.tick(time.time())
    except LeaseLost as err:  # fenced out or past the deadline mid-tick: the record was not written
        results, lost = {}, str(err)
    finally:
        lease.release()
    verdict = controller.lease_verdict
    held = verdict is not None and verdict.held and not lost
    summary: dict[str, Any] = {
        "trigger": "sqs" if records else "schedule",
        "leaseHeld": held,
        "reason": lost or (verdict.reason if verdict else ""),
        "token": verdict.token if verdict else 0,
        "pools": {
            name: {"step": r.step.kind.value if r.step else "whole", "actions": len(r.actions)}
            for name, r in results.items()
        },
    }
    if records:
        # A message the tick did not acknowledge (lease refused, record not saved) goes back on the queue.
        deleted = {h for shim in shims for h in shim.deleted}
        summary["batchItemFailures"] = [
            {"itemIdentifier": r["messageId"]} for r in records if r["receiptHandle"] not in deleted
        ]
    print(json.dumps({"kind": "tick_summary", **summary}, sort_keys=True))
    return summary
