"""A Pub/Sub Subscriber service on loopback, for the real google-cloud-pubsub client.

There is no Pub/Sub emulator to be had here (it ships with the gcloud SDK), so this
serves the three unary calls the controller makes (``Pull``, ``Acknowledge``,
``ModifyAckDeadline``) over real gRPC with the library's own request and response
types, and keeps the subscription's lease semantics: a pulled message is out for its
ack deadline, an ack removes it, a deadline of 0 makes it deliverable again at once.
The client finds it through ``PUBSUB_EMULATOR_HOST``, as it would the emulator.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    from google.protobuf import empty_pb2
    from google.pubsub_v1 import types

ACK_DEADLINE_SECONDS = 60.0


@dataclass
class _Message:
    message_id: str
    data: bytes
    out_until: float = 0.0  # leased to a puller until then
    deliveries: int = 0
    ack_id: str = ""
    #: Unix time Pub/Sub accepted it (``PubsubMessage.publish_time``, which the service always sets;
    #: None here leaves it unset, to test a reader's fallback).
    published_at: float | None = None


@dataclass
class FakeSubscription:
    name: str
    messages: list[_Message] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, body: dict[str, Any], published_at: float | None = None) -> None:
        """Accept a message as Pub/Sub does, stamping its publish time (now, unless given)."""
        at = time.time() if published_at is None else published_at
        with self._lock:
            self.messages.append(_Message(str(len(self.messages) + 1), json.dumps(body).encode(), published_at=at))

    def visible(self) -> list[str]:
        """Ids of the messages a pull would get now."""
        now = time.monotonic()
        with self._lock:
            return [m.message_id for m in self.messages if m.out_until <= now]

    def pull(self, request: types.PullRequest) -> types.PullResponse:
        self.calls.append("Pull")
        now = time.monotonic()
        out: list[types.ReceivedMessage] = []
        with self._lock:
            for m in self.messages:
                if m.out_until <= now and len(out) < request.max_messages:
                    m.deliveries += 1
                    m.out_until = now + ACK_DEADLINE_SECONDS
                    m.ack_id = f"{m.message_id}-{m.deliveries}"
                    published = (
                        {} if m.published_at is None else {"publish_time": datetime.fromtimestamp(m.published_at, UTC)}
                    )
                    message = types.PubsubMessage(data=m.data, message_id=m.message_id, **published)
                    out.append(types.ReceivedMessage(ack_id=m.ack_id, delivery_attempt=m.deliveries, message=message))
        return types.PullResponse(received_messages=out)

    def acknowledge(self, request: types.AcknowledgeRequest) -> empty_pb2.Empty:
        self.calls.append("Acknowledge")
        acked = set(request.ack_ids)
        with self._lock:
            self.messages = [m for m in self.messages if m.ack_id not in acked]
        return empty_pb2.Empty()

    def modify_ack_deadline(self, request: types.ModifyAckDeadlineRequest) -> empty_pb2.Empty:
        self.calls.append(f"ModifyAckDeadline({request.ack_deadline_seconds})")
        now, released = time.monotonic(), set(request.ack_ids)
        with self._lock:
            for m in self.messages:
                if m.ack_id in released:
                    m.out_until = now + request.ack_deadline_seconds
        return empty_pb2.Empty()


def _unary(handler: Any, request_type: Any, response_type: Any) -> grpc.RpcMethodHandler:
    serialize = response_type.serialize if hasattr(response_type, "serialize") else response_type.SerializeToString
    return grpc.unary_unary_rpc_method_handler(
        lambda request, context: handler(request),
        request_deserializer=request_type.deserialize,
        response_serializer=serialize,
    )


def serve(subscription: FakeSubscription) -> tuple[grpc.Server, int]:
    """Start the service on 127.0.0.1 on a free port; the caller stops the server."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handlers = {
        "Pull": _unary(subscription.pull, types.PullRequest, types.PullResponse),
        "Acknowledge": _unary(subscription.acknowledge, types.AcknowledgeRequest, empty_pb2.Empty),
        "ModifyAckDeadline": _unary(subscription.modify_ack_deadline, types.ModifyAckDeadlineRequest, empty_pb2.Empty),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("google.pubsub.v1.Subscriber", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port
