"""Base class for every spotgpu config model.

Config is validated once, at the edge: models are frozen (nothing downstream can
mutate a decision), reject unknown keys (a typo must not silently fall back to a
default), and accept both the camelCase keys used in Pulumi stack YAML and the
snake_case names used in Python.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict


class SpotModel(BaseModel):
    """Frozen, strict-keyed model; YAML keys are camelCase, Python names snake_case."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
    )


def fix_hint(text: str) -> JsonDict:
    """Attach a human fix to a field; `spotgpu.config.format_error` prints it."""
    return {"fix": text}


class FieldProblem(ValueError):
    """A validator's finding, pointed at a key below the model that raised it.

    ``at`` is the key path relative to that model (``"zones"``, ``"capacity.fallbackMax"``,
    ``"[2]"``); :func:`spotgpu.config.format_error` joins it to the model's own path and
    prints ``<path>: <what> (value: <value>); fix: <fix>``. The planners raise the same findings
    inside one :class:`spotgpu.config.PlanError`, rendered by the same line.
    """

    def __init__(self, what: str, *, fix: str, at: str = "", value: object = None) -> None:
        super().__init__(f"{what}; {fix}")
        self.what = what
        self.fix = fix
        self.at = at
        self.value = value

    def below(self, key: str) -> FieldProblem:
        """The same finding, pointed at from ``key``'s holder (``gpu.models`` below ``workloads.train``)."""
        at = self.at if self.at.startswith("[") or not self.at else f".{self.at}"
        return FieldProblem(self.what, fix=self.fix, at=f"{key}{at}", value=self.value)
