"""Recording mocks: capture every registration in the engine's wire form.

``RecordingMonitor`` keeps the raw ``RegisterResourceRequest`` (type, parent,
dependencies, camelCase inputs) because that is exactly what the engine would
hand to a policy analyzer. ``RecordingMocks`` invents the computed outputs a
real provider would return (ids, ARNs, emails, principal ids) so that components
wiring one resource into another see realistic values.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def _fake_uuid(seed: str) -> str:
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def fake_outputs(typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(id, outputs) for a resource type, echoing inputs plus plausible computed values."""
    out = dict(inputs)
    rid = f"{name}-id"
    if typ.startswith("aws:"):
        service = typ.split(":")[1].split("/")[0]
        out.setdefault("arn", f"arn:aws:{service}:us-east-1:123456789012:{name}")
        out.setdefault("name", name)
        if typ == "aws:sqs/queue:Queue":
            out.setdefault("url", f"https://sqs.us-east-1.amazonaws.com/123456789012/{name}")
        if typ == "aws:s3/bucket:Bucket":
            rid = inputs.get("bucket") or f"{name}-bucket"
            out.setdefault("bucket", rid)
        if typ == "aws:iam/role:Role":
            out.setdefault("uniqueId", _fake_uuid(name))
        if typ == "aws:ec2/launchTemplate:LaunchTemplate":
            out.setdefault("latestVersion", 1)
            out.setdefault("defaultVersion", 1)
    elif typ.startswith("gcp:"):
        out.setdefault("name", name)
        out.setdefault("selfLink", f"https://www.googleapis.com/compute/v1/projects/p/global/{name}")
        if typ == "gcp:serviceaccount/account:Account":
            account_id = inputs.get("accountId", name)
            out.setdefault("email", f"{account_id}@project.iam.gserviceaccount.com")
            out.setdefault("member", f"serviceAccount:{account_id}@project.iam.gserviceaccount.com")
        if typ.startswith("gcp:pubsub/"):
            out.setdefault("id", f"projects/p/{name}")
        if typ == "gcp:logging/projectSink:ProjectSink":
            out.setdefault("writerIdentity", f"serviceAccount:sink-{name}@gcp-sa-logging.iam.gserviceaccount.com")
        if typ == "gcp:storage/bucket:Bucket":
            rid = inputs.get("name", name)
            out.setdefault("url", f"gs://{rid}")
    elif typ.startswith("azure-native:"):
        rid = f"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/{typ}/{name}"
        out.setdefault("name", name)
        if typ == "azure-native:managedidentity:UserAssignedIdentity":
            out.setdefault("principalId", _fake_uuid(name + "p"))
            out.setdefault("clientId", _fake_uuid(name + "c"))
            out.setdefault("tenantId", _fake_uuid("tenant"))
        identity = out.get("identity")
        if isinstance(identity, dict) and "SystemAssigned" in str(identity.get("type", "")):
            # Azure makes a system identity with the resource and returns its ids (an Event Grid topic's).
            out["identity"] = {**identity, "principalId": _fake_uuid(name + "s"), "tenantId": _fake_uuid("tenant")}
            identity = out["identity"]
        if isinstance(identity, dict) and isinstance(identity.get("userAssignedIdentities"), list):
            # The engine returns a map keyed by identity id; echoing the input list
            # back crashes the SDK ("Expected 'list' got Mapping").
            out["identity"] = {
                **identity,
                "userAssignedIdentities": {
                    i: {"principalId": _fake_uuid(str(i)), "clientId": _fake_uuid(str(i) + "c")}
                    for i in identity["userAssignedIdentities"]
                },
            }
        if typ == "azure-native:storage:StorageAccount":
            acct = inputs.get("accountName", name)
            out.setdefault("primaryEndpoints", {"blob": f"https://{acct}.blob.core.windows.net/"})
    return rid, out


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        self.resources.append(args)
        return fake_outputs(args.typ, args.name, dict(args.inputs))

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]]]:
        token = args.token
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/x", "userId": "x"}, []
        if token == "aws:index/getRegion:getRegion":
            return {"name": "us-east-1", "region": "us-east-1", "id": "us-east-1"}, []
        if token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, []
        if token.startswith("azure-native:authorization:getClientConfig"):
            return {
                "clientId": _fake_uuid("client"),
                "objectId": _fake_uuid("object"),
                "subscriptionId": "00000000-0000-0000-0000-000000000000",
                "tenantId": _fake_uuid("tenant"),
            }, []
        if token == "gcp:organizations/getProject:getProject":
            return {"projectId": "project", "number": "123456789012", "name": "project"}, []
        return {}, []


@dataclass
class RecordedResource:
    """One registration as the engine sees it."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    provider: str = ""
    request: Any = None  # the raw RegisterResourceRequest (for the policy harness)

    @property
    def cloud(self) -> str:
        """aws | gcp | azure | other, from the type token (components: spotgpu:<cloud>:...)."""
        head = self.type.split(":")[0]
        if head == "spotgpu":
            head = self.type.split(":")[1]
        return {"aws": "aws", "gcp": "gcp", "azure-native": "azure", "azure": "azure"}.get(head, "other")


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recorded: list[RecordedResource] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        self.recorded.append(
            RecordedResource(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent,
                custom=request.custom,
                inputs=json_format.MessageToDict(request.object, preserving_proto_field_name=True),
                dependencies=list(request.dependencies),
                property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                provider=request.provider,
                request=request,
            )
        )
        return response
