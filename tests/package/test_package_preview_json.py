"""``spotgpu preview --json`` is byte-stable and carries the stack outputs; URNs never move."""

from __future__ import annotations

import json
import random

import pytest
from package_fixtures import recorded_urns, repo_preview

from spotgpu_pulumi.offline.preview import PreviewResult, to_document
from spotgpu_pulumi.offline.program import Recording


def _shuffled(result: PreviewResult, seed: int) -> PreviewResult:
    rng = random.Random(seed)
    rec = result.recording
    resources = list(rec.resources)
    rng.shuffle(resources)
    outputs = dict(reversed(list(rec.outputs.items())))
    violations = list(result.violations)
    rng.shuffle(violations)
    return PreviewResult(
        Recording(rec.project, rec.stack, resources, outputs, rec.config), violations, result.economics, result.notes
    )


def _bytes(result: PreviewResult) -> str:
    return json.dumps(to_document(result), indent=1)


def test_document_does_not_depend_on_registration_order() -> None:
    result = repo_preview("prod")
    reference = _bytes(result)
    for seed in range(3):
        assert _bytes(_shuffled(result, seed)) == reference
    urns = [r["urn"] for r in to_document(result)["resources"]]
    assert urns == sorted(urns)


def test_document_carries_the_stack_outputs_with_common_keys() -> None:
    outputs = to_document(repo_preview("prod"))["outputs"]
    assert set(outputs) == {"train-aws", "train-gcp", "train-az"}
    assert outputs["train-aws"]["checkpointStore"] == "s3://spotgpu-prod-train-aws-checkpoints/train-aws"


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_urns_are_the_recorded_ones(stack: str) -> None:
    """A changed URN means `pulumi up` replaces the resource: add an alias, never a silent move."""
    urns = sorted(r.urn for r in repo_preview(stack).recording.resources)
    assert urns == recorded_urns(stack)
