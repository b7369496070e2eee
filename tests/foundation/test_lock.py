"""The lock (constraints.txt) is what the environment holds, and what pyproject.toml asks for.

A fresh machine must install exactly what CI tested: ``./run`` installs with ``-c constraints.txt``
(made by ``tools/lock.py``), and these tests fail when the test environment drifts from it (a
package installed by hand, a stale lock after a pyproject.toml change) or the data generated from
a locked package (the AWS catalogue, from botocore and moto) was made from other versions.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def _lock_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spotgpu_lock_tool", REPO / "tools" / "lock.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = _lock_tool()


def _installed_here() -> dict[str, str]:
    """``{canonical name: version}`` of the distributions in this interpreter's own environment."""
    prefix = Path(sys.prefix).resolve()
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        where = Path(str(dist.locate_file(""))).resolve()
        if prefix in where.parents or where == prefix:
            found[lock.canonical(dist.metadata["Name"])] = dist.version
    return found


def drift(installed: dict[str, str], pins: dict[str, str]) -> list[str]:
    """One line per installed distribution the lock does not name at its (public) version."""
    lines = []
    for name, version in sorted(installed.items()):
        if name in lock.BOOTSTRAP or name == "spotgpu":
            continue
        if name not in pins:
            lines.append(f"{name}=={version} is installed but not in constraints.txt")
        elif lock.public_version(version) != pins[name]:
            lines.append(f"{name}=={version} is installed but constraints.txt says {pins[name]}")
    return lines


def test_the_environment_holds_exactly_what_the_lock_names() -> None:
    if sys.prefix == sys.base_prefix:
        pytest.skip("not run from a virtualenv (./run test uses .venv)")
    problems = drift(_installed_here(), lock.read_lock())
    assert not problems, (
        "the environment drifted from the lock:\n  " + "\n  ".join(problems)
        + "\nfix: rm -r .venv && ./run test (or, to move the lock: python3 tools/lock.py)"
    )


def test_the_drift_check_sees_an_extra_package_and_a_moved_version() -> None:
    pins = {"boto3": "1.44.8", "torch": "2.13.0"}
    assert drift({"boto3": "1.44.8", "torch": "2.13.0+cpu", "pip": "23.2.1", "spotgpu": "0.1.0"}, pins) == []
    assert drift({"boto3": "1.44.9", "six": "1.16.0"}, pins) == [
        "boto3==1.44.9 is installed but constraints.txt says 1.44.8",
        "six==1.16.0 is installed but not in constraints.txt",
    ]


def _project_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = list(project["dependencies"])
    for extra in lock.EXTRAS.split(","):
        wanted += project["optional-dependencies"][extra]
    return [Requirement(text) for text in wanted]


def test_the_lock_satisfies_every_requirement_of_pyproject() -> None:
    pins = lock.read_lock()
    stale = [
        f"{req} (lock: {pins.get(lock.canonical(req.name), 'missing')})"
        for req in _project_requirements()
        if lock.canonical(req.name) not in pins or pins[lock.canonical(req.name)] not in req.specifier
    ]
    assert not stale, "constraints.txt is stale for: " + "; ".join(stale) + "; fix: python3 tools/lock.py"


def test_every_extra_run_test_installs_is_one_pyproject_defines() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert set(lock.EXTRAS.split(",")) == set(project["optional-dependencies"]), (
        "tools/lock.py EXTRAS and pyproject.toml's extras differ: the lock must cover every extra"
    )


def test_the_aws_catalogue_was_generated_from_the_locked_botocore_and_moto() -> None:
    inputs = json.loads((REPO / "spotgpu" / "catalogue" / "data" / "aws.json").read_text())["inputs"]
    pins = lock.read_lock()
    assert inputs == {"botocore": pins["botocore"], "moto": pins["moto"]}, (
        "spotgpu/catalogue/data/aws.json was made from other versions; fix: python3 tools/lock.py "
        "(refreshes the lock, syncs .venv and regenerates the catalogue)"
    )


def test_the_lock_file_reads_back_and_rejects_a_loose_line(tmp_path: Path) -> None:
    good = tmp_path / "c.txt"
    good.write_text("# header\nFoo_Bar==1.0  # why\n\nbaz==2\n")
    assert lock.read_lock(good) == {"foo-bar": "1.0", "baz": "2"}
    bad = tmp_path / "bad.txt"
    bad.write_text("foo>=1\n")
    with pytest.raises(ValueError, match="not name==version"):
        lock.read_lock(bad)
