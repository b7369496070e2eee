"""The suite's own layout: pytest imports test modules by their basename (the folders are not
packages), so two test files of one name make the second folder fail to collect at all.

Defect: tests/integrations/test_tiers.py beside tests/economics/test_tiers.py; a fresh clone's CI
run reported ``import file mismatch`` and never ran the new file's tests.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_python_module_under_tests_has_its_own_basename() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name != "conftest.py" and "__pycache__" not in path.parts:
            seen[path.name].append(str(path.relative_to(TESTS)))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not twice, f"rename one of each: {twice}"
