"""Layers point one way (issue 24, item 3): a test fails on an import that points the wrong way.

The VM runtime (agent, checkpoint library, gang, framework callbacks, bootstrap) never imports
the controller; the contract package imports no part at all; the economics import neither the
controller nor the simulations, and the controller not the simulations (which import both);
and no two packages of ``spotgpu`` import each other, directly or round a longer circle.
Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

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


def test_the_storage_layer_imports_nothing_of_spotgpu_but_itself() -> None:
    """One object-store layer for checkpoints, controller records and leases, below the contract and the
    checkpoint library. Defect: there were two (the checkpoint library's and the contract's state store,
    with two ``file://`` implementations), the state store parsing URLs with the checkpoint library's parser."""
    assert spotgpu_imports_outside(["spotgpu/storage"], ("spotgpu.storage",)) == []


def test_the_checkpoint_library_imports_only_storage_and_the_contract_of_the_parts() -> None:
    assert offenders(["spotgpu/checkpoint"], tuple(p for p in PARTS if p != "spotgpu.checkpoint")) == []


def spotgpu_imports_outside(roots: list[str], allowed: tuple[str, ...]) -> list[str]:
    """Every import of a ``spotgpu`` module that is not in one of the ``allowed`` packages."""
    return [
        f"{path.relative_to(REPO)} imports {name}"
        for path in files(*roots)
        for name in sorted(modules_imported(path))
        if name.split(".")[0] == "spotgpu" and not any(name == a or name.startswith(a + ".") for a in allowed)
    ]


def test_the_storage_check_catches_an_import_pointing_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = tmp_path / "spotgpu" / "storage" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("import spotgpu.storage.urls\ndef f():\n    from spotgpu.contract.store_url import parse_store_url\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    found = spotgpu_imports_outside(["spotgpu/storage"], ("spotgpu.storage",))
    assert found == ["spotgpu/storage/probe.py imports spotgpu.contract.store_url"]


def test_the_catalogue_is_data_below_the_models() -> None:
    """Defect: the catalogue's checks imported spotgpu.models.base while the pool models imported them."""
    assert offenders(["spotgpu/catalogue"], ("spotgpu.models", *PARTS)) == []


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from spotgpu.controller.reconcile import reconcile\n    import spotgpu.economics.cost\n")
    assert modules_imported(probe) == {"spotgpu.controller.reconcile", "spotgpu.economics.cost"}


def test_the_economics_and_the_controller_never_import_the_simulations() -> None:
    """Defect: the economics imported the twin (``spotgpu.controller.twin``) while the controller imported
    the economics; the twin and the trace replays now live in ``spotgpu.simulation``, above both."""
    assert offenders(["spotgpu/economics"], ("spotgpu.controller", "spotgpu.simulation")) == []
    assert offenders(["spotgpu/controller"], ("spotgpu.simulation",)) == []


def package_of(module: str) -> str | None:
    """``spotgpu.economics.cost`` -> ``spotgpu.economics``; top-level modules are their own package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "spotgpu" and len(parts) >= 2 else None


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in files("spotgpu"):
        rel = path.relative_to(REPO).with_suffix("")
        own = package_of(".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
        if own is None or own == "spotgpu.__main__":
            continue
        for name in modules_imported(path):
            other = package_of(name)
            if other is not None and other != own and other != "spotgpu.__init__":
                graph.setdefault(own, set()).add(other)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more packages (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                top = stack.pop()
                members.append(top)
                if top == node:
                    break
            if len(members) > 1:
                out.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_two_packages_import_each_other() -> None:
    assert circles(package_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
