from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from spotgpu.config import read_stack_file

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def prod_raw() -> dict[str, Any]:
    """The prod stack's project config, as plain data, to mutate per test."""
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    return copy.deepcopy(raw)
