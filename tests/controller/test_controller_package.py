"""``spotgpu controller package``: what goes into the Lambda zip (and what never does)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from spotgpu.controller.package import PackageError, _closure, _copy_runtime_source, write_zip


def test_the_runtime_closure_has_the_aws_sdk_and_no_pulumi() -> None:
    names = {d.metadata["Name"].lower() for d in _closure("spotgpu", ("aws",))}
    assert {"spotgpu", "boto3", "obstore", "pydantic", "pyyaml"} <= names
    assert not [n for n in names if n.startswith("pulumi")], names


def test_the_zip_holds_the_handler_and_refuses_the_pulumi_sdk(tmp_path: Path) -> None:
    src = tmp_path / "site"
    src.mkdir()
    _copy_runtime_source(src)
    out = tmp_path / "fn.zip"
    assert write_zip(src, out) > 50
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        assert "spotgpu/controller/aws_lambda.py" in names
        assert not [n for n in names if "__pycache__" in n]
        assert {i.date_time for i in zf.infolist()} == {(2020, 1, 1, 0, 0, 0)}, "reproducible timestamps"
    (src / "pulumi").mkdir()
    (src / "pulumi" / "__init__.py").write_text("")
    with pytest.raises(PackageError, match="must not contain the Pulumi SDK"):
        write_zip(src, out)
