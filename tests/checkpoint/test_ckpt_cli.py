"""``spotgpu ckpt list|verify|gc`` through the real dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spotgpu.checkpoint import CheckpointManager
from spotgpu.cli import main
from tests.checkpoint.ckpt_files import flip_byte


def make_store(tmp_path, steps=(1, 2, 3)):
    mgr = CheckpointManager(tmp_path.as_uri())
    for step in steps:
        mgr.save(step, {"x": bytes([step]) * 1000})
    return mgr


def test_list_table_and_json(tmp_path, capsys):
    make_store(tmp_path)
    assert main(["ckpt", "list", tmp_path.as_uri()]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["STEP", "GENERATION", "STATE"]
    assert len(out.splitlines()) == 4 and "committed" in out
    assert main(["ckpt", "list", tmp_path.as_uri(), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["step"] for r in rows] == [3, 2, 1] and all(r["committed"] for r in rows)


def test_verify_exit_codes(tmp_path, capsys):
    mgr = make_store(tmp_path)
    assert main(["ckpt", "verify", tmp_path.as_uri()]) == 0
    assert capsys.readouterr().out.count("OK") == 3
    newest = mgr.list()[0].generation
    flip_byte(tmp_path, newest, "x", at=0.0)
    assert main(["ckpt", "verify", tmp_path.as_uri()]) == 1
    assert "hash mismatch" in capsys.readouterr().out
    assert main(["ckpt", "verify", tmp_path.as_uri(), newest, "--json"]) == 1
    (report,) = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["generation"] == newest
    assert main(["ckpt", "verify", tmp_path.as_uri(), "2"]) == 0


def test_verify_of_an_empty_store_fails(tmp_path, capsys):
    assert main(["ckpt", "verify", tmp_path.as_uri()]) == 1
    assert "no committed generations" in capsys.readouterr().err
    assert main(["ckpt", "verify", str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == []  # stdout stays one JSON document


def test_gc_keeps_k(tmp_path, capsys):
    make_store(tmp_path)
    assert main(["ckpt", "gc", tmp_path.as_uri(), "--keep", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["kept"]) == 2 and len(report["retired"]) == 1
    assert main(["ckpt", "gc", tmp_path.as_uri(), "--keep", "1"]) == 0
    assert "retired" in capsys.readouterr().out
    assert [i.step for i in CheckpointManager(tmp_path.as_uri()).list()] == [3]


def test_a_bare_directory_path_is_a_store(tmp_path, capsys):
    make_store(tmp_path, steps=(7,))
    assert main(["ckpt", "list", str(tmp_path), "--json"]) == 0
    assert [r["step"] for r in json.loads(capsys.readouterr().out)] == [7]


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ("/some/path", "spotgpu ckpt list: /some/path: does not exist; fix:"),
        ("file:///some/path", "spotgpu ckpt list: file:///some/path: does not exist; fix:"),
        ("ftp://host/x", "spotgpu ckpt list: url: 'ftp://host/x' has scheme 'ftp'; fix:"),
        ("s3://", "spotgpu ckpt list: url: 's3://' has no bucket; fix:"),
    ],
)
def test_a_bad_store_is_one_line_and_exit_two(store, message, capsys):
    assert main(["ckpt", "list", store]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_a_file_is_not_a_store(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["ckpt", "gc", str(tmp_path / "f")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_the_reported_traceback_is_gone():
    """The issue's exact command, as a user runs it: one line, exit 2, no traceback."""
    run = subprocess.run(
        [sys.executable, "-m", "spotgpu", "ckpt", "list", "/some/path"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_cloud_store_through_the_environment_and_a_missing_bucket(s3_server, monkeypatch, capsys):
    """obstore reads the usual AWS_* variables; a bucket that is not there is one line, exit 2."""
    for key, value in {
        "AWS_ENDPOINT_URL": s3_server["endpoint"],
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }.items():
        monkeypatch.setenv(key, value)
    CheckpointManager("s3://ckpt/cli-env", store_options=s3_server).save(1, {"x": b"1" * 10})
    assert main(["ckpt", "list", "s3://ckpt/cli-env", "--json"]) == 0
    assert [r["step"] for r in json.loads(capsys.readouterr().out)] == [1]
    assert main(["ckpt", "list", "s3://no-such-bucket/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spotgpu ckpt list: s3://no-such-bucket/x: ") and err.count("\n") == 1
    assert "fix: check the credentials and endpoint" in err and "Traceback" not in err
