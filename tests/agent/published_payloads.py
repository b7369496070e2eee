"""Notice payloads as others published them, each naming where it was published.

The bodies are copied verbatim (whitespace aside). Most carry a date in the past; a test that
needs the notice ahead of it moves the date with :meth:`Payload.dated`, which writes the new
time in the payload's own format (one-digit day and all), so the shape stays the published one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime


def rfc1123(ts: float) -> str:
    """``Tue, 16 Mar 2021 00:58:46 GMT`` (Azure Scheduled Events, AWS Health)."""
    return format_datetime(datetime.fromtimestamp(ts, UTC), usegmt=True)


def go_imds(ts: float) -> str:
    """``2 Jan 2006 15:04:05 GMT``: AWS scheduled events (a one-digit day stays one digit)."""
    moment = datetime.fromtimestamp(ts, UTC)
    return f"{moment.day} {moment.strftime('%b %Y %H:%M:%S')} GMT"


def iso_z(ts: float) -> str:
    """``2017-09-18T08:22:00Z``: AWS IMDS, GCE, Microsoft's Scheduled Events mock server."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Payload:
    name: str
    #: the metadata path it is served on (query ignored by the fakes)
    path: str
    body: str
    #: where it was published: repository, path and commit, or the documentation page
    source: str
    status: int = 200
    #: the dates in ``body`` and the format each is written in, for :meth:`dated`
    dates: tuple[tuple[str, Callable[[float], str]], ...] = field(default=())

    def dated(self, *at: float) -> str:
        """The body with its dates moved to ``at`` (in order), each in its own format."""
        body = self.body
        for (old, fmt), when in zip(self.dates, at, strict=True):
            body = body.replace(old, fmt(when))
        return body


# --- AWS IMDS --------------------------------------------------------------------------------

AWS_INSTANCE_ACTION = Payload(
    "aws-spot-instance-action",
    "/latest/meta-data/spot/instance-action",
    '{"action": "terminate", "time": "2017-09-18T08:22:00Z"}',
    "AWS EC2 User Guide, 'Spot Instance interruption notices' (instance-action example)",
    dates=(("2017-09-18T08:22:00Z", iso_z),),
)
AWS_REBALANCE = Payload(
    "aws-rebalance-recommendation",
    "/latest/meta-data/events/recommendations/rebalance",
    '{"noticeTime": "2020-10-27T08:22:00Z"}',
    "AWS EC2 User Guide, 'EC2 instance rebalance recommendations' (noticeTime example)",
    dates=(("2020-10-27T08:22:00Z", iso_z),),
)
AWS_SCHEDULED_REBOOT = Payload(
    "aws-scheduled-system-reboot",
    "/latest/meta-data/events/maintenance/scheduled",
    """[
  {
    "NotBefore" : "21 Jan 2019 09:00:43 GMT",
    "Code" : "system-reboot",
    "Description" : "scheduled reboot",
    "EventId" : "instance-event-0d59937288b749b32",
    "NotAfter" : "21 Jan 2019 09:17:23 GMT",
    "State" : "active"
  }
]""",
    "aws/aws-node-termination-handler pkg/ec2metadata/ec2metadata.go @62a8761d (the ScheduledEventDetail sample)",
    dates=(("21 Jan 2019 09:00:43 GMT", go_imds), ("21 Jan 2019 09:17:23 GMT", go_imds)),
)
#: amazon-ec2-metadata-mock's scheduled event (pkg/mock/events/events.go: Go layout
#: "2 Jan 2006 15:04:05 GMT", default event-id from pkg/config/defaults), as `aemm events -o instance-stop`.
AWS_SCHEDULED_STOP_AEMM = Payload(
    "aws-scheduled-instance-stop-aemm",
    "/latest/meta-data/events/maintenance/scheduled",
    '[{"Code":"instance-stop","Description":"The instance is scheduled for instance-stop",'
    '"State":"active","EventId":"instance-event-1234567890abcdef0",'
    '"NotBefore":"2 Jan 2006 15:04:05 GMT","NotAfter":"9 Jan 2006 15:04:05 GMT",'
    '"NotBeforeDeadline":"12 Jan 2006 15:04:05 GMT"}]',
    "aws/amazon-ec2-metadata-mock pkg/mock/events/events.go and pkg/cmd/events/events.go @bdf3096a",
    dates=(
        ("2 Jan 2006 15:04:05 GMT", go_imds),
        ("9 Jan 2006 15:04:05 GMT", go_imds),
        ("12 Jan 2006 15:04:05 GMT", go_imds),
    ),
)
AWS_SCHEDULED_NONE = Payload(
    "aws-scheduled-none",
    "/latest/meta-data/events/maintenance/scheduled",
    "[]",
    "AWS EC2 User Guide, 'View scheduled events' (an instance without events lists none)",
)
AWS_TARGET_TERMINATED = Payload(
    "aws-target-lifecycle-terminated",
    "/latest/meta-data/autoscaling/target-lifecycle-state",
    "Terminated",
    "aws/amazon-ec2-metadata-mock pkg/mock/asglifecycle/asglifecycle.go @bdf3096a (text answer, 'Terminated')",
)
AWS_TARGET_IN_SERVICE = Payload(
    "aws-target-lifecycle-inservice",
    "/latest/meta-data/autoscaling/target-lifecycle-state",
    "InService",
    "aws/amazon-ec2-metadata-mock pkg/mock/asglifecycle/asglifecycle.go @bdf3096a (the initial state)",
)
AWS_TARGET_EMPTY = Payload(
    "aws-target-lifecycle-empty",
    "/latest/meta-data/autoscaling/target-lifecycle-state",
    "",
    "aws/aws-node-termination-handler pkg/ec2metadata/ec2metadata.go @62a8761d ('State can be empty string if the "
    "lifecycle hook is not present')",
)

# --- GCP metadata server ---------------------------------------------------------------------

GCP_MIGRATE = Payload(
    "gcp-maintenance-migrate",
    "/computeMetadata/v1/instance/maintenance-event",
    "MIGRATE_ON_HOST_MAINTENANCE",
    "Compute Engine docs, 'Query metadata server for maintenance event notices' (the value flips ~60 s before)",
)
GCP_TERMINATE = Payload(
    "gcp-maintenance-terminate",
    "/computeMetadata/v1/instance/maintenance-event",
    "TERMINATE_ON_HOST_MAINTENANCE",
    "Compute Engine docs, 'GPU host maintenance' (GPU VMs get a 1-hour stopping notice)",
)
GCP_SHUTDOWN = Payload(
    "gcp-maintenance-shutdown-sample",
    "/computeMetadata/v1/instance/maintenance-event",
    "SHUTDOWN_ON_HOST_MAINTENANCE",
    "GoogleCloudPlatform/python-docs-samples compute/metadata/main.py ('Possible events: ... "
    "SHUTDOWN_ON_HOST_MAINTENANCE: instance will be shut down')",
)
GCP_UPCOMING = Payload(
    "gcp-upcoming-maintenance",
    "/computeMetadata/v1/instance/upcoming-maintenance",
    """{
"can_reschedule": "true",
"latest_window_start_time": "2024-12-01T19:00:01Z",
"maintenance_reasons": [
"PLANNED_UPDATE",
"PLANNED_NETWORK_UPDATE"
],
"maintenance_status": "PENDING",
"type": "SCHEDULED",
"window_end_time": "2024-12-01T21:00:01Z",
"window_start_time": "2024-12-01T19:00:01Z"
}""",
    "Google Cloud docs, AI Hypercomputer 'Manage host events across compute instances' (upcoming-maintenance?alt=json)",
    dates=(("2024-12-01T19:00:01Z", iso_z), ("2024-12-01T21:00:01Z", iso_z)),
)
GCP_UPCOMING_NONE = Payload(
    "gcp-upcoming-maintenance-none",
    "/computeMetadata/v1/instance/upcoming-maintenance",
    "{ }",
    "Google Cloud docs, AI Hypercomputer 'Manage host events across compute instances' (no event scheduled)",
)
GCP_UPCOMING_NOT_YET = Payload(
    "gcp-upcoming-maintenance-503",
    "/computeMetadata/v1/instance/upcoming-maintenance",
    '{ "error": "no notifications have been received yet, try again later" }',
    "GoogleCloudPlatform/sapagent shared/gce/metadataserver (metadataNoUpcomingMaintenanceResponse, served with 503)",
    status=503,
)

# --- Azure Scheduled Events ------------------------------------------------------------------

AZURE_PREEMPT = Payload(
    "azure-preempt-spot-cli",
    "/metadata/scheduledevents",
    '{"DocumentIncarnation":1,"Events":[{"EventId":"A123BC45-1234-5678-AB90-ABCDEF123456","EventStatus":"Scheduled",'
    '"EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["myspotvm"],'
    '"NotBefore":"Tue, 16 Mar 2021 00:58:46 GMT","Description":"","EventSource":"Platform"}]}',
    "MicrosoftDocs azure-compute-docs articles/virtual-machines/linux/spot-cli.md (simulated eviction, api 2019-08-01)",
    dates=(("Tue, 16 Mar 2021 00:58:46 GMT", rfc1123),),
)
AZURE_REBOOT_AKS = Payload(
    "azure-reboot-aks-capture",
    "/metadata/scheduledevents",
    """{
  "DocumentIncarnation": 1,
  "Events": [
    {
      "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
      "EventType": "Reboot",
      "ResourceType": "VirtualMachine",
      "Resources": [
        "FrontEnd_IN_0",
        "aks-spotcpu2d2as-24469130-vmss_1"
      ],
      "EventStatus": "Scheduled",
      "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
      "Description": "Host server is undergoing maintenance",
      "EventSource": "Platform",
      "DurationInSeconds": -1
    }
  ]
}""",
    "maksim-paskal/aks-node-termination-handler pkg/types/testdata/ScheduledEventsType.json @7eba703d",
    dates=(("Mon, 19 Sep 2016 18:29:47 GMT", rfc1123),),
)
AZURE_EMPTY = Payload(
    "azure-empty-200",
    "/metadata/scheduledevents",
    "",
    "maksim-paskal/aks-node-termination-handler pkg/events/events.go @7eba703d ('Events response is empty': "
    "HTTP 200, empty body on real AKS nodes)",
)
AZURE_FREEZE_MOCK = Payload(
    "azure-freeze-ms-mock-server",
    "/metadata/scheduledevents",
    '{"DocumentIncarnation": 2, "Events": [{"EventId": "f020ba2e-3bc0-4c40-a10b-86575a9eabd5", '
    '"EventStatus": "Scheduled", "EventType": "Freeze", "ResourceType": "VirtualMachine", '
    '"Resources": ["vmss_vm1"], "EventSource": "Platform", "NotBefore": "2026-12-02T18:15:00Z", '
    '"Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.", '
    '"DurationInSeconds": 5}]}',
    "Azure-Samples/scheduled-events-mock-server main.py @91fe3ff1 ('Live Migration' scenario; NotBefore written "
    "with strftime('%Y-%m-%dT%H:%M:%SZ'))",
    dates=(("2026-12-02T18:15:00Z", iso_z),),
)
AZURE_CANCELED_MOCK = Payload(
    "azure-canceled-ms-mock-server",
    "/metadata/scheduledevents",
    '{"DocumentIncarnation": 3, "Events": []}',
    "Azure-Samples/scheduled-events-mock-server main.py @91fe3ff1 (a Completed or Canceled event: an empty list)",
)
