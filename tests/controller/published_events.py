"""Event messages as others published them, each naming where it was published.

Bodies are verbatim (whitespace aside) unless the entry says what was changed and why (only
ever an instance id, to name a VM of the test's pool, or a value, to make a shape the source
documents but did not print). ``expect`` is what the controller must make of it: an
observation (kind, VM, zone, time and time basis) or a drop with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Published:
    name: str
    body: dict[str, Any]
    source: str
    #: ("interruption", kind, vm, zone, time basis) | ("launch_failure", reason, group, zone, time basis)
    #: | ("launched", vm) | ("dropped", reason)
    expect: tuple[object, ...]
    #: the event's own time when it has a usable one (else the receive time is expected)
    at: str | None = None


NTH = "aws/aws-node-termination-handler pkg/monitor/sqsevent/sqs-monitor_test.go @62a8761d"
EC2_UG_FLEET = "AWS EC2 User Guide, 'EC2 Fleet event types' (awsdocs amazon-ec2-user-guide)"
ASG_UG = "AWS EC2 Auto Scaling User Guide, 'Amazon EC2 Auto Scaling event reference' (example events)"

AWS: list[Published] = [
    Published(
        "spot-warning-ec2-user-guide",
        {"version": "0", "id": "12345678-1234-1234-1234-123456789012",
         "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2", "account": "123456789012",
         "time": "yyyy-mm-ddThh:mm:ssZ", "region": "us-east-2",
         "resources": ["arn:aws:ec2:us-east-2a:instance/i-1234567890abcdef0"],
         "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "action"}},
        "AWS EC2 User Guide, 'Spot Instance interruption notices' (EventBridge example: the time is a "
        "placeholder, the ARN's region slot holds the Availability Zone)",
        ("interruption", "interruption", "i-1234567890abcdef0", "us-east-2a", "received"),
    ),
    Published(
        "spot-warning-nth",
        {"version": "0", "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
         "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2", "account": "123456789012",
         "time": "1970-01-01T00:00:00Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],
         "detail": {"instance-id": "i-0b662ef9931388ba0", "instance-action": "terminate"}},
        f"{NTH} (spotItnEvent)",
        ("interruption", "interruption", "i-0b662ef9931388ba0", "us-east-1b", "cloud"),
        at="1970-01-01T00:00:00Z",
    ),
    Published(
        "spot-warning-nth-no-time",
        {"version": "0", "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
         "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2", "account": "123456789012",
         "time": "", "region": "us-east-1", "resources": ["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],
         "detail": {"instance-id": "i-0b662ef9931388ba0", "instance-action": "terminate"}},
        f"{NTH} (spotItnEventNoTime: the same event with Time emptied; NTH falls back to the receive time)",
        ("interruption", "interruption", "i-0b662ef9931388ba0", "us-east-1b", "received"),
    ),
    Published(
        "rebalance-nth",
        {"version": "0", "id": "5d5555d5-dd55-5555-5555-5555dd55d55d",
         "detail-type": "EC2 Instance Rebalance Recommendation", "source": "aws.ec2", "account": "123456789012",
         "time": "2020-10-26T14:14:14Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0"],
         "detail": {"instance-id": "i-0b662ef9931388ba0"}},
        f"{NTH} (rebalanceRecommendationEvent)",
        ("interruption", "rebalance", "i-0b662ef9931388ba0", "us-east-1b", "cloud"),
        at="2020-10-26T14:14:14Z",
    ),
    Published(
        "state-change-nth-terminated",
        {"version": "0", "id": "7bf73129-1428-4cd3-a780-95db273d1602",
         "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "account": "123456789012",
         "time": "2015-11-11T21:29:54Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-abcd1111"],
         "detail": {"instance-id": "i-abcd1111", "state": "terminated"}},
        "aws/aws-node-termination-handler pkg/monitor/sqsevent/ec2-state-change-event.go @62a8761d (the example "
        "with state 'pending' changed to 'terminated', one of the states NTH drains on and the rule routes)",
        ("interruption", "terminated", "i-abcd1111", "", "cloud"),
        at="2015-11-11T21:29:54Z",
    ),
    Published(
        "lifecycle-terminate-nth",
        {"version": "0", "id": "782d5b4c-0f6f-1fd6-9d62-ecf6aed0a470",
         "detail-type": "EC2 Instance-terminate Lifecycle Action", "source": "aws.autoscaling",
         "account": "123456789012", "time": "2020-07-01T22:19:58Z", "region": "us-east-1",
         "resources": ["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:26e7234b-03a4-47fb-b0a9-"
                       "2b241662774e:autoScalingGroupName/nth-test1"],
         "detail": {"LifecycleActionToken": "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6",
                    "AutoScalingGroupName": "nth-test1", "LifecycleHookName": "node-termination-handler",
                    "EC2InstanceId": "i-0633ac2b0d9769723", "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING"}},
        f"{NTH} (asgLifecycleEvent)",
        ("interruption", "terminating", "i-0633ac2b0d9769723", "", "cloud"),
        at="2020-07-01T22:19:58Z",
    ),
    Published(
        "lifecycle-test-notification-nth",
        {"version": "0", "id": "782d5b4c-0f6f-1fd6-9d62-ecf6aed0a470",
         "detail-type": "EC2 Instance-terminate Lifecycle Action", "source": "aws.autoscaling",
         "account": "123456789012", "time": "2020-07-01T22:19:58Z", "region": "us-east-1",
         "resources": ["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:26e7234b-03a4-47fb-b0a9-"
                       "2b241662774e:autoScalingGroupName/nth-test1"],
         "detail": {"Event": "autoscaling:TEST_NOTIFICATION", "LifecycleTransition": "autoscaling:TEST_NOTIFICATION"}},
        f"{NTH} (asgLifecycleTestNotification)",
        ("dropped", "test-notification"),
    ),
    Published(
        "launch-unsuccessful-asg-guide",
        {"version": "0", "id": "12345678-1234-1234-1234-123456789012",
         "detail-type": "EC2 Instance Launch Unsuccessful", "source": "aws.autoscaling", "account": "123456789012",
         "time": "yyyy-mm-ddThh:mm:ssZ", "region": "us-west-2", "resources": ["auto-scaling-group-arn", "instance-arn"],
         "detail": {"StatusCode": "Failed", "AutoScalingGroupName": "my-auto-scaling-group",
                    "ActivityId": "87654321-4321-4321-4321-210987654321",
                    "Details": {"Availability Zone": "us-west-2b", "Subnet ID": "subnet-12345678"},
                    "RequestId": "12345678-1234-1234-1234-123456789012", "StatusMessage": "message-text",
                    "EndTime": "yyyy-mm-ddThh:mm:ssZ", "EC2InstanceId": "i-1234567890abcdef0",
                    "StartTime": "yyyy-mm-ddThh:mm:ssZ", "Cause": "description-text"}},
        f"{ASG_UG} (EC2 Instance Launch Unsuccessful: placeholder times and message)",
        ("launch_failure", "other", "my-auto-scaling-group", "us-west-2b", "received"),
    ),
    Published(
        "launch-unsuccessful-instance-limit",
        {"version": "0", "id": "12345678-1234-1234-1234-123456789013",
         "detail-type": "EC2 Instance Launch Unsuccessful", "source": "aws.autoscaling", "account": "123456789012",
         "time": "2026-11-30T12:00:00Z", "region": "us-west-2", "resources": ["auto-scaling-group-arn", "instance-arn"],
         "detail": {"StatusCode": "Failed", "AutoScalingGroupName": "my-auto-scaling-group",
                    "ActivityId": "87654321-4321-4321-4321-210987654322",
                    "Details": {"Availability Zone": "us-west-2b", "Subnet ID": "subnet-12345678"},
                    "StatusMessage": "5 instance(s) are already running. Launching EC2 instance failed.",
                    "Cause": "description-text"}},
        f"{ASG_UG}, with the StatusMessage of the EC2 Auto Scaling troubleshooting guide ('<number of instances> "
        "instance(s) are already running. Launching EC2 instance failed.')",
        ("launch_failure", "quota", "my-auto-scaling-group", "us-west-2b", "cloud"),
        at="2026-11-30T12:00:00Z",
    ),
    Published(
        "launch-successful-asg-guide",
        {"version": "0", "id": "12345678-1234-1234-1234-123456789012",
         "detail-type": "EC2 Instance Launch Successful", "source": "aws.autoscaling", "account": "123456789012",
         "time": "yyyy-mm-ddThh:mm:ssZ", "region": "us-west-2", "resources": ["auto-scaling-group-arn", "instance-arn"],
         "detail": {"StatusCode": "InProgress", "Description": "Launching a new EC2 instance: i-12345678",
                    "AutoScalingGroupName": "my-auto-scaling-group",
                    "ActivityId": "87654321-4321-4321-4321-210987654321",
                    "Details": {"Availability Zone": "us-west-2b", "Subnet ID": "subnet-12345678"},
                    "RequestId": "12345678-1234-1234-1234-123456789012", "StatusMessage": "",
                    "EndTime": "yyyy-mm-ddThh:mm:ssZ", "EC2InstanceId": "i-1234567890abcdef0",
                    "StartTime": "yyyy-mm-ddThh:mm:ssZ", "Cause": "description-text"}},
        f"{ASG_UG} (EC2 Instance Launch Successful)",
        ("launched", "i-1234567890abcdef0"),
    ),
    Published(
        "fleet-information-launch-spec-unusable",
        {"version": "0", "id": "76529817-d605-4571-7224-d36cc1b2c0c4", "detail-type": "EC2 Fleet Information",
         "source": "aws.ec2fleet", "account": "123456789012", "time": "2020-11-09T08:17:07Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1:123456789012:fleet/fleet-8becf5fe-bb9e-415d-8f54-3fa5a8628b91"],
         "detail": {"description": "c4.xlarge, ami-0947d2ba12ee1ff75, Linux/UNIX, us-east-1a, Spot price in either "
                    "SpotFleetRequestConfigData or SpotFleetLaunchSpecification or LaunchTemplate or "
                    "LaunchTemplateOverrides is less than Spot market price $0.0619", "sub-type": "launchSpecUnusable"}},
        EC2_UG_FLEET,
        ("launch_failure", "price", "fleet-8becf5fe-bb9e-415d-8f54-3fa5a8628b91", "us-east-1a", "cloud"),
        at="2020-11-09T08:17:07Z",
    ),
    Published(
        "fleet-error-configuration-invalid",
        {"version": "0", "id": "69849a22-6d0f-d4ce-602b-b47c1c98240e", "detail-type": "EC2 Fleet Error",
         "source": "aws.ec2fleet", "account": "123456789012", "time": "2020-10-07T01:44:24Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1:123456789012:fleet/fleet-9bb19bc6-60d3-4fd2-ae47-d33e68eafa08"],
         "detail": {"description": "m3.large, ami-00068cd7555f543d5, Linux/UNIX: IPv6 is not supported for the "
                    "instance type 'm3.large'. ", "sub-type": "spotFleetRequestConfigurationInvalid"}},
        EC2_UG_FLEET,
        ("launch_failure", "other", "fleet-9bb19bc6-60d3-4fd2-ae47-d33e68eafa08", "", "cloud"),
        at="2020-10-07T01:44:24Z",
    ),
    Published(
        "fleet-error-spot-count-limit",
        {"version": "0", "id": "69849a22-6d0f-d4ce-602b-b47c1c98240f", "detail-type": "EC2 Fleet Error",
         "source": "aws.ec2fleet", "account": "123456789012", "time": "2020-10-07T01:44:24Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1:123456789012:fleet/fleet-9bb19bc6-60d3-4fd2-ae47-d33e68eafa08"],
         "detail": {"description": "You've reached the limit on the number of Spot Instances that you can launch.",
                    "sub-type": "spotInstanceCountLimitExceeded"}},
        f"{EC2_UG_FLEET} (the Error example with sub-type spotInstanceCountLimitExceeded and its documented meaning)",
        ("launch_failure", "quota", "fleet-9bb19bc6-60d3-4fd2-ae47-d33e68eafa08", "", "cloud"),
        at="2020-10-07T01:44:24Z",
    ),
    Published(
        "fleet-instance-launched",
        {"version": "0", "id": "542ce428-c8f1-0608-c015-e8ed6522c5bc", "detail-type": "EC2 Fleet Instance Change",
         "source": "aws.ec2fleet", "account": "123456789012", "time": "2020-11-09T09:00:23Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1:123456789012:fleet/fleet-598fb973-87b7-422d-be4d-6b0809bfff0a"],
         "detail": {"instance-id": "i-0c594155dd5ff1829",
                    "description": '{"instanceType":"c5.large","image":"ami-6057e21a","productDescription":'
                                   '"Linux/UNIX","availabilityZone":"us-east-1d"}', "sub-type": "launched"}},
        EC2_UG_FLEET,
        ("launched", "i-0c594155dd5ff1829"),
    ),
    Published(
        "fleet-instance-terminated",
        {"version": "0", "id": "542ce428-c8f1-0608-c015-e8ed6522c5bd", "detail-type": "EC2 Fleet Instance Change",
         "source": "aws.ec2fleet", "account": "123456789012", "time": "2020-11-09T09:00:23Z", "region": "us-east-1",
         "resources": ["arn:aws:ec2:us-east-1:123456789012:fleet/fleet-598fb973-87b7-422d-be4d-6b0809bfff0a"],
         "detail": {"instance-id": "i-0c594155dd5ff1829",
                    "description": '{"instanceType":"c5.large","image":"ami-6057e21a","productDescription":'
                                   '"Linux/UNIX","availabilityZone":"us-east-1d"}', "sub-type": "terminated"}},
        f"{EC2_UG_FLEET} (the Instance Change example with its documented sub-type 'terminated')",
        ("interruption", "terminated", "i-0c594155dd5ff1829", "us-east-1d", "cloud"),
        at="2020-11-09T09:00:23Z",
    ),
    Published(
        "health-scheduled-change-nth",
        {"version": "0", "id": "7fb65329-1628-4cf3-a740-95fg457h1402", "detail-type": "AWS Health Event",
         "source": "aws.health", "account": "account id", "time": "2016-06-05T06:27:57Z", "region": "us-east-1",
         "resources": ["i-12345678"],
         "detail": {"eventArn": "arn:aws:health:region::event/id", "service": "EC2",
                    "eventTypeCode": "AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED",
                    "eventTypeCategory": "scheduledChange", "startTime": "Sat, 05 Jun 2016 15:10:09 GMT",
                    "eventDescription": [{"language": "en_US",
                                          "latestDescription": "A description of the event will be provided here"}],
                    "affectedEntities": [{"entityValue": "i-12345678", "tags": {"stage": "prod", "app": "my-app"}}]}},
        "aws/aws-node-termination-handler pkg/monitor/sqsevent/scheduled-change-event.go @62a8761d (the example)",
        ("interruption", "maintenance-scheduled", "i-12345678", "", "cloud"),
        at="2016-06-05T06:27:57Z",
    ),
]

SIE = "thought-machine/spot-interruption-exporter"
GCP: list[Published] = [
    Published(
        "preempted-spot-interruption-exporter",
        {"protoPayload": {"@type": "type.googleapis.com/google.cloud.audit.AuditLog",
                          "status": {"message": "Instance was preempted."},
                          "authenticationInfo": {"principalEmail": "system@google.com"},
                          "serviceName": "compute.googleapis.com", "methodName": "compute.instances.preempted",
                          "resourceName": "projects/mock-project/zones/europe-west1-c/instances/"
                                          "mock-instance-spot-3706-5b909138-nr65",
                          "request": {"@type": "type.googleapis.com/compute.instances.preempted"}},
         "insertId": "qnwer3e38dfz",
         "resource": {"type": "gce_instance", "labels": {"instance_id": "184448819...", "project_id": "mock-project",
                                                          "zone": "europe-west1-c"}},
         "timestamp": "2023-09-16T10:42:31.325309Z", "severity": "INFO",
         "logName": "projects/mock-project/logs/cloudaudit.googleapis.com%2Fsystem_event",
         "operation": {"id": "systemevent-1694860946116....", "producer": "compute.instances.preempted",
                       "first": True, "last": True},
         "receiveTimestamp": "2023-09-16T10:42:31.782066320Z"},
        f"{SIE} pkg/events/pubsub_test.go (a recorded preemption log entry)",
        ("interruption", "preempted", "mock-instance-spot-3706-5b909138-nr65", "europe-west1-c", "cloud"),
        at="2023-09-16T10:42:31.325309Z",
    ),
    Published(
        "preempted-minimal-no-timestamp",
        {"protoPayload": {"@type": "type.googleapis.com/google.cloud.audit.AuditLog",
                          "methodName": "compute.instances.preempted",
                          "resourceName": "projects/mock-project/zones/europe-west1-c/instances/"
                                          "mock-instance-spot-3706-5b909138-nr65"}},
        f"{SIE} README ('You can send a test interruption message via gcloud pubsub topics publish ...')",
        ("interruption", "preempted", "mock-instance-spot-3706-5b909138-nr65", "europe-west1-c", "received"),
    ),
    Published(
        "insert-failure-gcpdiag",
        {"protoPayload": {"methodName": "compute.instances.insert", "status": {"message": "ZONE_RESOURCE_POOL_EXHAUSTED"}},
         "resource": {"labels": {"zone": "us-central1-a"}}, "severity": "ERROR"},
        "GoogleCloudPlatform/gcpdiag test-data/gce1/json-dumps/logging-entries-1.json (not a method the sink routes)",
        ("dropped", "unknown-shape"),
    ),
]

EG_DOC = "MicrosoftDocs/azure-compute-docs articles/virtual-machines/scheduled-events-event-grid.md"
_EG_SUBJECT = ("/subscriptions/{subscription-id}/resourceGroups/{rg-name}/providers/Microsoft.Compute/"
               "virtualMachineScaleSets/{vmss-name}/providers/microsoft.maintenance/scheduledevents/{event-id}")


def _eg(event_type: str, status: str, resources: list[str], not_before: str = "Mon, 19 Sep 2025 18:29:47 GMT") -> dict[str, Any]:
    """The documentation's sample event; ``event_type``, ``status`` and ``resources`` as the case says."""
    return {
        "id": "3da1b9aa-5204-4335-8c33-c54e315dcffe",
        "topic": "/subscriptions/{subscription-id}",
        "subject": _EG_SUBJECT,
        "data": {
            "resourceInfo": {
                "id": _EG_SUBJECT, "name": "{event-id}", "type": "microsoft.maintenance/scheduledEvents",
                "location": "eastus",
                "properties": {"DurationInSeconds": 5,
                               "Description": "Virtual machine is being paused because of a memory-preserving Live "
                                              "Migration operation.",
                               "EventId": "3da1b9aa-5204-4335-8c33-c54e315dcffe", "EventSource": "Platform",
                               "EventStatus": status, "EventType": event_type, "NotBefore": not_before,
                               "Resources": resources, "ResourceType": "VirtualMachine"},
            },
            "apiVersion": "2024-07-01",
        },
        "eventType": "Microsoft.ResourceNotifications.MaintenanceResources.ScheduledEventEmitted",
        "dataVersion": "3.0",
        "metadataVersion": "1",
        "eventTime": "2017-06-26T18:41:00.9584103Z",
    }


#: Zone "": Event Grid names a location, not a zone, and these VMs were never listed; a VM listed at an
#: earlier tick gets its zone from the controller's record (test_published_events.py, the zone memory test).
AZURE: list[Published] = [
    Published(
        "freeze-started-doc",
        _eg("Freeze", "Started", ["myvmss_1", "myvmss_2"]),
        f"{EG_DOC} (the detailed schema's sample, verbatim)",
        ("interruption", "maintenance-scheduled", "myvmss_1", "", "cloud"),
        at="2017-06-26T18:41:00.9584103Z",
    ),
    Published(
        "preempt-scheduled-doc",
        _eg("Preempt", "Scheduled", ["myvmss_1"]),
        f"{EG_DOC} (the sample with EventType Preempt and one resource, as the EventType table documents it)",
        ("interruption", "evicted", "myvmss_1", "", "cloud"),
        at="2017-06-26T18:41:00.9584103Z",
    ),
    Published(
        "preempt-canceled-doc",
        _eg("Preempt", "Canceled", ["myvmss_1"]),
        f"{EG_DOC} (EventStatus Canceled: 'the scheduled impact won't proceed')",
        ("dropped", "canceled"),
    ),
    Published(
        "preempt-completed-doc",
        _eg("Preempt", "Completed", ["myvmss_1"], not_before=""),
        f"{EG_DOC} (EventStatus Completed, Event Grid only: an eviction whose Scheduled event was missed)",
        ("interruption", "evicted", "myvmss_1", "", "cloud"),
        at="2017-06-26T18:41:00.9584103Z",
    ),
]
