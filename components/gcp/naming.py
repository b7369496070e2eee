"""Deterministic Google Cloud names for one pool, from stable keys only.

Other resources and the instance-template metadata refer to these names as plain
strings (the fallback MIG name, the bucket in ``gs://...``), and the drill finds
the MIGs by them, so they cannot be Pulumi autonames. Every name is derived from
pool + environment (+ a stable key such as the accelerator signature), and
shortened with a hash when Google's length limit would be hit, never truncated
into a collision.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from spotgpu.models.base import FieldProblem

#: RFC 1035 style names used by Compute Engine, Pub/Sub ids and service accounts.
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _digest(text: str, n: int = 6) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def fit(name: str, limit: int) -> str:
    """``name`` if it fits, else its head plus a hash of the whole (still unique, still valid)."""
    if len(name) <= limit:
        return name
    head = name[: limit - 7].rstrip("-")
    return f"{head}-{_digest(name)}"


@dataclass(frozen=True)
class PoolNames:
    """All names of one pool in one environment."""

    project: str
    pool: str
    environment: str

    @property
    def prefix(self) -> str:
        return f"{self.pool}-{self.environment}"

    def spot_mig(self, group_key: str) -> str:
        """``<pool>-<env>-spot-<accelerator key>``: stable even when the ranking of groups changes."""
        return fit(f"{self.prefix}-spot-{group_key}", 58)

    @property
    def spot_base_instance_prefix(self) -> str:
        """Every spot VM name of the pool starts with this (the preemption log filter relies on it)."""
        return f"{self.prefix}-spot"

    @property
    def fallback_mig(self) -> str:
        return fit(f"{self.prefix}-od", 58)

    def template_prefix(self, role_key: str) -> str:
        """``name_prefix`` of a template: templates are immutable, so they are create-before-delete autonamed."""
        return fit(f"{self.prefix}-{role_key}-", 37).rstrip("-") + "-"

    @property
    def bucket(self) -> str:
        """Globally unique: the project id keeps two projects' pools apart."""
        return fit(f"{self.project}-{self.prefix}-ckpt", 63)

    def service_account_id(self, role: str) -> str:
        """6-30 chars: ``<pool>-<env>-<role>`` or a hashed short form."""
        return fit(f"{self.prefix}-{role}", 30)

    @property
    def topic(self) -> str:
        return fit(f"{self.prefix}-preempted", 255)

    @property
    def subscription(self) -> str:
        return fit(f"{self.prefix}-preempted-ctl", 255)

    @property
    def sink(self) -> str:
        return fit(f"{self.prefix}-preempted", 100)

    @property
    def controller_role_id(self) -> str:
        """Custom role ids allow ``[a-zA-Z0-9_.]`` only."""
        return fit(f"spotgpu.{self.prefix}.controller", 64).replace("-", "_")


def check_name(name: str, what: str) -> FieldProblem | None:
    """The finding when a derived name breaks Compute Engine's rule (the planner raises it at the pool's name)."""
    if _RFC1035.match(name):
        return None
    return FieldProblem(f"makes a {what} name that is not a valid Google Cloud name", at="name", value=name,
                        fix="use lowercase letters, digits and '-' in the pool name and environment")
