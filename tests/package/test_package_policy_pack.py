"""The policy pack is self-contained: pinned requirements only, versions agreeing with the package."""

from __future__ import annotations

import tomllib

import yaml
from package_fixtures import REPO

from spotgpu_pulumi.offline.pack import default_policy_pack


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _requirements() -> dict[str, str]:
    lines = [ln.strip() for ln in (REPO / "policies" / "requirements.txt").read_text().splitlines()]
    pins: dict[str, str] = {}
    for line in lines:
        if not line or line.startswith("#"):
            continue
        assert not line.startswith("-") and "/" not in line and "==" in line, f"not an index pin: {line}"
        name, version = line.split("==")
        pins[name.lower()] = version
    return pins


def test_requirements_are_pins_matching_pyproject() -> None:
    project = _pyproject()["project"]
    pins = _requirements()
    assert pins["spotgpu"] == project["version"]
    extra = dict(req.split("==") for req in project["optional-dependencies"]["pulumi"])
    for name in ("pulumi-policy", "pulumi"):
        assert pins[name] == extra[name], name


def test_pack_version_is_the_package_version() -> None:
    meta = yaml.safe_load((REPO / "policies" / "PulumiPolicy.yaml").read_text())
    assert str(meta["version"]) == _pyproject()["project"]["version"]


def test_wheel_ships_every_pack_file() -> None:
    """pyproject's data-files must list every file of the pack (a new rule module included)."""
    data_files = _pyproject()["tool"]["setuptools"]["data-files"]
    listed = set()
    for patterns in data_files.values():
        for pattern in patterns:
            listed.update(p.relative_to(REPO).as_posix() for p in REPO.glob(pattern))
    pack = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "policies").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".yaml", ".txt")
    }
    assert pack == listed


def test_checkout_uses_its_own_pack() -> None:
    assert default_policy_pack() == REPO / "policies"
