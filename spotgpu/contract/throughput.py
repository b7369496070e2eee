"""What the workload tells its node agent about its speed: one step-time report, written here once.

The training loop's ``AgentClient.report_throughput`` builds a :class:`ThroughputReport` from its
arguments (:meth:`ThroughputReport.of`, naming a bad one as the argument it is) and posts
:meth:`ThroughputReport.to_json` (``POST /v1/throughput``); the agent's control endpoint reads
the body back with :meth:`ThroughputReport.from_json` (a bad one is a 400 naming the key) and logs
it as a ``throughput`` record. Both sides check the fields by the one set of rules in
:meth:`ThroughputReport._read`, so a value the client refuses is one the agent refuses, in the
same words.

The body stays readable across versions both ways: its keys are those the client sent before this
module (``stepSeconds``, ``steps``, ``gpuModel``), and a body without ``steps`` (or ``null``) is
the mean of one step, as the agent before it read one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotgpu.contract import fields

#: Longer than any catalogue GPU model name; a longer one is a mistake, not a GPU.
MAX_GPU_MODEL_CHARS = 64

#: Each field's key on the body and the client's argument it comes from.
KEYS = ("stepSeconds", "steps", "gpuModel")
ARGUMENTS = ("step_seconds", "steps", "gpu_model")

_SECONDS_FIX = "use the mean seconds per training step over the steps reported"
_STEPS_FIX = "use how many steps the step time is the mean of"
_MODEL = f"a GPU model name of 1 to {MAX_GPU_MODEL_CHARS} characters"
_MODEL_FIX = "use the catalogue's name such as 'A100', or leave it out for the agent to name from its instance type"


@dataclass(frozen=True)
class ThroughputReport:
    """What the workload measured: the mean seconds of its last ``steps`` steps, on ``gpu_model`` if it said
    (None: the agent names the model from its own instance type)."""

    step_seconds: float
    steps: int = 1
    gpu_model: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``POST /v1/throughput`` body: ``stepSeconds`` and ``steps``, ``gpuModel`` when named."""
        seconds, steps, model = KEYS
        body: dict[str, Any] = {seconds: self.step_seconds, steps: self.steps}
        if self.gpu_model is not None:
            body[model] = self.gpu_model
        return body

    @classmethod
    def from_json(cls, doc: object) -> ThroughputReport:
        """Read a ``POST /v1/throughput`` body; one that is not a report raises ValueError naming the key
        (``throughput.stepSeconds: not a finite number above 0 (value: 0); fix: ...``)."""
        return cls._read(fields.document(doc, "throughput"), "throughput", KEYS)

    @classmethod
    def of(cls, step_seconds: object, steps: object, gpu_model: object, *, what: str) -> ThroughputReport:
        """A report from a caller's arguments, by the same rules; a bad one raises ValueError naming the
        argument as ``{what}.{argument}`` (``report_throughput.step_seconds: ...``), in the words
        :meth:`from_json` uses for the same value."""
        if steps is None:  # an argument left at None is the caller's bug; an older body without the key is not
            raise fields.problem(f"{what}.steps", "a whole number of at least 1", steps, _STEPS_FIX)
        return cls._read(dict(zip(ARGUMENTS, (step_seconds, steps, gpu_model), strict=True)), what, ARGUMENTS)

    @classmethod
    def _read(cls, doc: dict[str, Any], what: str, keys: tuple[str, str, str]) -> ThroughputReport:
        """The rules, written once: a finite step time above 0, a whole step count of at least 1
        (absent: 1), and an optional GPU model name, stripped, of 1 to 64 characters."""
        seconds_key, steps_key, model_key = keys
        seconds = fields.number(doc, seconds_key, what, required=True, above=0, fix=_SECONDS_FIX)
        steps = fields.whole(doc, steps_key, what, least=1, fix=_STEPS_FIX)
        model = fields.text(doc, model_key, what, wanted=_MODEL, fix=_MODEL_FIX)
        if model is not None and not 0 < len(model.strip()) <= MAX_GPU_MODEL_CHARS:
            raise fields.problem(f"{what}.{model_key}", _MODEL, model, _MODEL_FIX)
        return cls(seconds, 1 if steps is None else steps, None if model is None else model.strip())


__all__ = ["ARGUMENTS", "KEYS", "MAX_GPU_MODEL_CHARS", "ThroughputReport"]
