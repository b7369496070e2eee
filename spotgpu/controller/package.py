"""``spotgpu controller package``: the AWS Lambda zip of the controller runtime (never the Pulumi SDK).

Two ways to fill it, both ending in the same zip layout (packages at the zip's
root, handler ``spotgpu.controller.aws_lambda.handler``):

* ``--source pip`` (default): ``pip install --target`` for the Lambda platform
  (``manylinux2014_x86_64`` or ``_aarch64``, CPython 3.11, binary wheels only),
  so it works from any build machine. Needs the package index.
* ``--source env``: copy the installed distributions of ``spotgpu[aws]``'s
  dependency closure from the running environment. Works offline, and only on a
  Linux host of the function's architecture with Python 3.11 (checked).

Either way the zip is refused if anything named ``pulumi*`` got in.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_ZIP = Path("dist/spotgpu-controller-lambda.zip")
HANDLER = "spotgpu.controller.aws_lambda.handler"
LAMBDA_RUNTIME = "python3.11"
ARCH_PLATFORMS = {"x86_64": "manylinux2014_x86_64", "arm64": "manylinux2014_aarch64"}


class PackageError(RuntimeError):
    """The package cannot be built; the message says how to fix it."""


def _closure(root: str, extras: tuple[str, ...]) -> list[md.Distribution]:
    """The installed distributions ``root[extras]`` needs (markers evaluated for this interpreter)."""
    try:
        from packaging.requirements import Requirement
    except ModuleNotFoundError:
        raise PackageError("--source env reads requirement markers with 'packaging'; fix: pip install packaging") from None
    seen: dict[str, md.Distribution] = {}
    todo: list[tuple[str, tuple[str, ...]]] = [(root, extras)]
    while todo:
        name, want = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise PackageError(f"{name} is not installed here; fix: pip install it, or use --source pip") from None
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            envs = [{"extra": e} for e in want] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, tuple(req.extras)))
    return list(seen.values())


def _copy_runtime_source(dest: Path) -> None:
    """The spotgpu package itself, from the code being run (an editable install has no files to copy)."""
    import spotgpu

    src = Path(spotgpu.__file__).resolve().parent
    shutil.copytree(src, dest / "spotgpu", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def fill_from_env(dest: Path, architecture: str) -> None:
    machine = {"x86_64": "x86_64", "arm64": "aarch64"}[architecture]
    if sys.platform != "linux" or platform.machine() != machine or sys.version_info[:2] != (3, 11):
        raise PackageError(
            f"--source env needs Linux {machine} with Python 3.11 (this is {sys.platform} {platform.machine()} "
            f"Python {sys.version_info.major}.{sys.version_info.minor}); fix: use --source pip"
        )
    for dist in _closure("spotgpu", ("aws",)):
        if dist.metadata["Name"].lower() == "spotgpu":
            _copy_runtime_source(dest)
            continue
        base = Path(str(dist.locate_file("")))
        for rel in dist.files or []:
            parts = Path(str(rel)).parts
            if not parts or parts[0] == ".." or "__pycache__" in parts or str(rel).endswith(".pyc"):
                continue
            target = dest / Path(str(rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / Path(str(rel)), target)


def fill_from_pip(dest: Path, architecture: str, requirement: str) -> None:
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--target", str(dest),
        "--platform", ARCH_PLATFORMS[architecture], "--implementation", "cp", "--python-version", "3.11",
        "--only-binary=:all:", requirement,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PackageError(f"pip install for the Lambda platform failed: {done.stderr.strip()[-400:]}")


def write_zip(src: Path, out: Path) -> int:
    """Zip ``src`` deterministically (sorted, fixed timestamps); returns the number of files."""
    leaked = sorted(p.name for p in src.iterdir() if p.name.lower().startswith("pulumi"))
    if leaked:
        raise PackageError(f"the Lambda package must not contain the Pulumi SDK, found {leaked}")
    out.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    tmp = out.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for path in files:
            info = zipfile.ZipInfo(str(path.relative_to(src)), date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    tmp.replace(out)
    return len(files)


def build_package(out: Path, architecture: str = "x86_64", source: str = "pip", requirement: str | None = None) -> int:
    if architecture not in ARCH_PLATFORMS:
        raise PackageError(f"--architecture {architecture!r}: use x86_64 or arm64")
    with tempfile.TemporaryDirectory(prefix="spotgpu-lambda-") as tmp:
        dest = Path(tmp)
        if source == "env":
            fill_from_env(dest, architecture)
        else:
            from spotgpu import __version__

            fill_from_pip(dest, architecture, requirement or f"spotgpu[aws]=={__version__}")
        return write_zip(dest, out)
