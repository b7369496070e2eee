"""What the planner asks for; adapters and hooks carry it out.

Capacity only ever shrinks through :class:`RemoveInstance` of a named VM whose
workload has committed a checkpoint after its drain request. Desired counts are
never set below the VMs a group already holds, so the cloud never picks a victim.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SetDesired:
    group: str
    desired: int
    reason: str


@dataclass(frozen=True)
class RequestDrain:
    """Ask the node agent to stop new work, commit a checkpoint and report it."""

    group: str
    vm_id: str


@dataclass(frozen=True)
class RemoveInstance:
    """Delete one drained VM and lower its group's desired count by one."""

    group: str
    vm_id: str


@dataclass(frozen=True)
class Defer:
    """Tell the scheduler to queue the pool's work; the controller stops spending."""

    pool: str
    reason: str


@dataclass(frozen=True)
class Resume:
    pool: str


Action = SetDesired | RequestDrain | RemoveInstance | Defer | Resume
