"""Layers point one way (issue 24, item 3): a test fails on an import that points the wrong way.

The VM runtime (agent, checkpoint library, gang, framework callbacks, bootstrap) never imports
the controller; the contract package imports no part at all. Imports inside functions count
too: a lazy import is still a dependency. Not checked yet (issue 24, open): ``spotgpu.economics``
imports ``spotgpu.controller.twin`` while the controller imports ``spotgpu.economics``.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNTIME = ["spotgpu/agent", "spotgpu/checkpoint", "spotgpu/gang", "spotgpu/integrations", "spotgpu/bootstrap.py"]
PARTS = ("spotgpu.agent", "spotgpu.controller", "spotgpu.economics", "spotgpu.drills", "spotgpu.gang",
         "spotgpu.integrations", "spotgpu.checkpoint", "spotgpu.simulation", "spotgpu.cli", "components",
         "spotgpu_pulumi", "pulumi")  # fmt: skip


def modules_imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def files(*roots: str) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        path = REPO / root
        out.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return out


def offenders(roots: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(REPO)} imports {name}"
        for path in files(*roots)
        for name in sorted(modules_imported(path))
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


def test_the_vm_runtime_never_imports_the_controller() -> None:
    """Defect: the node agent imported spotgpu.controller.hooks and .store (the drain channel)."""
    assert offenders(RUNTIME, ("spotgpu.controller", "spotgpu.economics", "components", "spotgpu_pulumi")) == []


def test_the_contract_imports_no_part() -> None:
    """Defect: the contract's state store parsed URLs with the checkpoint library's parser."""
    assert offenders(["spotgpu/contract"], PARTS) == []


def test_the_catalogue_is_data_below_the_models() -> None:
    """Defect: the catalogue's checks imported spotgpu.models.base while the pool models imported them."""
    assert offenders(["spotgpu/catalogue"], ("spotgpu.models", *PARTS)) == []


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from spotgpu.controller.plan import reconcile\n    import spotgpu.economics.cost\n")
    assert modules_imported(probe) == {"spotgpu.controller.plan", "spotgpu.economics.cost"}
