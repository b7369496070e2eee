"""EventBridge patterns for one pool's interruption and capacity signals (pure).

Keys are stable rule keys (they become resource names). EC2 Spot warnings,
rebalance recommendations and instance state changes carry only an instance
id, so those rules are account-wide and the controller keeps the events whose
instance carries this pool's ``spotgpu-pool`` tag. Auto Scaling events carry the
group name, so those rules match this pool's groups only.
"""

from __future__ import annotations

from typing import Any

SPOT_SIGNALS = ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation")
STATE_CHANGE = "EC2 Instance State-change Notification"
WATCHED_STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")
#: Launch outcomes: failures are the "capacity unavailable" signal; successes end a reacquisition.
LAUNCH_OUTCOMES = ("EC2 Instance Launch Unsuccessful", "EC2 Instance Launch Successful")
TERMINATE_ACTION = "EC2 Instance-terminate Lifecycle Action"
FLEET_EVENTS = ("EC2 Fleet Error", "EC2 Fleet Information", "EC2 Fleet Instance Change", "EC2 Fleet State Change")


def event_patterns(group_names: list[str]) -> dict[str, dict[str, Any]]:
    """``{rule key: pattern}`` for a pool with these Auto Scaling groups."""
    if not group_names:
        raise ValueError("a pool always has at least its fallback group")
    groups = sorted(group_names)
    patterns: dict[str, dict[str, Any]] = {
        "spot-signals": {"source": ["aws.ec2"], "detail-type": list(SPOT_SIGNALS)},
        "state-changes": {
            "source": ["aws.ec2"],
            "detail-type": [STATE_CHANGE],
            "detail": {"state": list(WATCHED_STATES)},
        },
        "launches": {
            "source": ["aws.autoscaling"],
            "detail-type": list(LAUNCH_OUTCOMES),
            "detail": {"AutoScalingGroupName": groups},
        },
        "terminations": {
            "source": ["aws.autoscaling"],
            "detail-type": [TERMINATE_ACTION],
            "detail": {"AutoScalingGroupName": groups},
        },
    }
    return patterns


def fleet_pattern(fleet_arn: str) -> dict[str, Any]:
    """Fleet-mode rule: this fleet's errors, information and instance changes."""
    return {"source": ["aws.ec2fleet"], "detail-type": list(FLEET_EVENTS), "resources": [fleet_arn]}
