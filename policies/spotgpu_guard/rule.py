"""Turn a check (catalog, config) -> findings into a CrossGuard stack policy."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)

from spotgpu_guard.catalog import Catalog
from spotgpu_guard.inventory import Inventory


@dataclass(frozen=True)
class Finding:
    """One violation: the offending resource's URN and a message saying what and how to fix."""

    urn: str
    message: str


class NotApplicable(Exception):
    """Raised by a check that cannot run at all (e.g. the cost model is not installed)."""


Check = Callable[[Catalog, Mapping[str, Any]], Iterable[Finding]]


def stack_rule(
    name: str,
    description: str,
    level: EnforcementLevel,
    check: Check,
    *,
    schema: dict[str, dict[str, Any]] | None = None,
    remediation: str,
) -> StackValidationPolicy:
    """A stack policy running ``check``; schema defaults apply even when the engine sent none."""
    defaults = {k: v["default"] for k, v in (schema or {}).items() if "default" in v}

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        config = {**defaults, **(args.get_config() or {})}
        catalog = Catalog(Inventory.from_args(args))
        try:
            for finding in check(catalog, config):
                report_violation(finding.message, finding.urn)
        except NotApplicable as reason:
            args.not_applicable(str(reason))

    return StackValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=level,
        config_schema=PolicyConfigSchema(properties=schema) if schema else None,
        remediation_steps=f"{remediation} (docs/policies.md#{name})",
    )
