"""Shared helpers for the package tests: one in-process preview per stack, reused."""

from __future__ import annotations

import functools
from pathlib import Path

from spotgpu_pulumi.offline.preview import PreviewResult, run_preview

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


@functools.cache
def repo_preview(stack: str) -> PreviewResult:
    """The repository's own stack, previewed with the policy pack (cached: ~10 s each)."""
    return run_preview(REPO, stack, REPO / "policies", REPO / "policy-config.json")


def recorded_urns(stack: str) -> list[str]:
    """URNs recorded before the package refactor (issue 15), plus the controller jobs (issue 14) added
    after it: a recorded URN must never change; a new resource is added to the recording on purpose."""
    return (DATA / f"urns-{stack}.txt").read_text().split()
