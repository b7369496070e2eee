"""EventBridge patterns for one pool's interruption and capacity signals (pure).

Keys are stable rule keys (they become resource names). EC2 Spot warnings,
rebalance recommendations, instance state changes and AWS Health scheduled changes
carry only instance ids, so those rules are account-wide and the controller keeps the
events whose instance carries this pool's ``spotgpu-pool`` tag. Auto Scaling events carry
the group name, so those rules match this pool's groups only. The detail-types and states
are the contract's (:mod:`spotgpu.contract.sources`, ``AWS_ROUTED``), which the controller
parses, each with a branch of its own: a rule cannot route a shape the parser ignores.
"""

from __future__ import annotations

from typing import Any

from spotgpu.contract.sources import (
    AWS_FLEET_EVENTS,
    AWS_HEALTH_DETAIL,
    AWS_HEALTH_EVENT,
    AWS_LAUNCH_OUTCOMES,
    AWS_SPOT_SIGNALS,
    AWS_STATE_CHANGE,
    AWS_TERMINATE_ACTION,
    AWS_WATCHED_STATES,
)


def event_patterns(group_names: list[str]) -> dict[str, dict[str, Any]]:
    """``{rule key: pattern}`` for a pool with these Auto Scaling groups."""
    if not group_names:
        raise ValueError("a pool always has at least its fallback group")
    groups = sorted(group_names)
    patterns: dict[str, dict[str, Any]] = {
        "spot-signals": {"source": ["aws.ec2"], "detail-type": list(AWS_SPOT_SIGNALS)},
        "state-changes": {
            "source": ["aws.ec2"],
            "detail-type": [AWS_STATE_CHANGE],
            "detail": {"state": list(AWS_WATCHED_STATES)},
        },
        "launches": {
            "source": ["aws.autoscaling"],
            "detail-type": list(AWS_LAUNCH_OUTCOMES),
            "detail": {"AutoScalingGroupName": groups},
        },
        "terminations": {
            "source": ["aws.autoscaling"],
            "detail-type": [AWS_TERMINATE_ACTION],
            "detail": {"AutoScalingGroupName": groups},
        },
        # Instance retirement and other scheduled changes to EC2 instances, as
        # aws-node-termination-handler routes them (its README's MyK8sScheduledChangeRule).
        "scheduled-changes": {"source": ["aws.health"], "detail-type": [AWS_HEALTH_EVENT], "detail": AWS_HEALTH_DETAIL},
    }
    return patterns


def fleet_pattern(fleet_arn: str) -> dict[str, Any]:
    """Fleet-mode rule: this fleet's errors and information (launch failures) and instance changes."""
    return {"source": ["aws.ec2fleet"], "detail-type": list(AWS_FLEET_EVENTS), "resources": [fleet_arn]}
