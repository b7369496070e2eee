"""Store URLs: one parser, every form a pool exports opens as is, and bad input is one line.

Defects (issue 22 item 6 and issue 24):
- ``CheckpointManager("/plain/path")`` was refused although the CLI takes plain paths;
- ``CheckpointManager("file:///a/file")`` was accepted and failed later with NotADirectoryError;
- credentials in a URL were echoed back in the error;
- non-string state keys got a message with no fix;
- ``CheckpointManager("az://acct/ckpt/job")`` (the form Azure pools export) opened container
  ``acct`` and wrote ``ckpt/job/...`` into it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from spotgpu.checkpoint import CheckpointManager
from spotgpu.cli import main
from spotgpu.storage.urls import parse_store_url, redact_url

SECRETS = ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI", "hunter2")


def test_a_plain_path_is_accepted_like_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    CheckpointManager(str(tmp_path / "abs")).save(1, {"x": b"1"})
    monkeypatch.chdir(tmp_path)
    rel = CheckpointManager("abs")
    assert rel.url == (tmp_path / "abs").as_uri()
    assert rel.restore().step == 1  # type: ignore[union-attr]


def test_a_file_url_naming_a_file_is_refused_at_once(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("not a directory")
    with pytest.raises(ValueError) as err:
        CheckpointManager(target.as_uri())
    line = str(err.value)
    assert "\n" not in line and line.startswith("url: ") and "is a file, not a directory" in line and "fix:" in line


@pytest.mark.parametrize(
    "url",
    [
        "s3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI@bucket/p",
        "file://admin:hunter2@host/srv/ckpt",
        "az://AKIAIOSFODNN7EXAMPLE@acct/c/p",
        "gs://user:hunter2@bucket/p",
    ],
)
def test_credentials_in_a_url_are_never_echoed(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError) as err:
        CheckpointManager(url)
    line = str(err.value)
    assert "has credentials in it" in line and "***@" in line and "fix:" in line
    assert not any(s in line for s in SECRETS)
    assert main(["ckpt", "list", url]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and not any(s in stderr for s in SECRETS)


def test_redact_url_keeps_everything_but_the_user_info() -> None:
    assert redact_url("s3://k:s@b/p/q") == "s3://***@b/p/q"
    assert redact_url("s3://b/p@x") == "s3://b/p@x"
    assert redact_url("/plain/path") == "/plain/path"


@pytest.mark.parametrize("key", [1, ("a", 1), None, ""])
def test_a_non_string_state_key_gets_the_fix(tmp_path: Path, key: Any) -> None:
    with pytest.raises(TypeError) as err:
        CheckpointManager(tmp_path.as_uri()).save(1, {key: b"x"})
    line = str(err.value)
    assert "\n" not in line and line.startswith("state key: ") and "fix: use string keys" in line
    assert not (tmp_path / "generations").exists()


@pytest.mark.parametrize(
    ("url", "scheme", "account", "bucket", "prefix"),
    [
        ("az://acct/ckpt/job", "az", "acct", "ckpt", "job"),
        ("az://acct/ckpt/a/b/", "az", "acct", "ckpt", "a/b"),
        ("az://acct/ckpt", "az", "acct", "ckpt", ""),
        ("https://acct.blob.core.windows.net/ckpt/job", "az", "acct", "ckpt", "job"),
        ("s3://bucket/jobs/x", "s3", None, "bucket", "jobs/x"),
        ("gs://bucket", "gs", None, "bucket", ""),
    ],
)
def test_the_one_parser(url: str, scheme: str, account: str | None, bucket: str, prefix: str) -> None:
    where = parse_store_url(url)
    assert (where.scheme, where.account, where.bucket, where.prefix) == (scheme, account, bucket, prefix)


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("az://acct", "storage account and a container"),
        ("s3:///p", "has no bucket"),
        ("ftp://h/p", "has scheme 'ftp'"),
        ("file://host/p", "has host 'host'"),
        ("", "is not a store URL"),
    ],
)
def test_bad_urls_are_one_line(url: str, needle: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_store_url(url)
    assert needle in str(err.value) and "fix:" in str(err.value) and "\n" not in str(err.value)


def test_the_exported_azure_form_opens_the_account_and_container_on_azurite(azurite: dict[str, Any]) -> None:
    """The pools' own helper makes the URL; the manager opens it as is; the blobs land in
    container ``ckpt`` of the account, under the prefix (not in a container named after the account)."""
    from azure.storage.blob import BlobServiceClient

    from components.azure.naming import checkpoint_store_url

    account = azurite["account_name"]
    url = checkpoint_store_url(account, "ckpt", "jobs/exported")
    assert url == f"az://{account}/ckpt/jobs/exported"
    mgr = CheckpointManager(url, store_options=azurite)
    mgr.save(3, {"x": b"azure"})
    assert CheckpointManager(url, store_options=azurite).restore().state["x"] == b"azure"  # type: ignore[union-attr]
    endpoint = os.environ["AZURITE_BLOB_STORAGE_URL"]
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={azurite['account_key']};"
        f"BlobEndpoint={endpoint}/{account};"
    )
    service = BlobServiceClient.from_connection_string(conn)
    names = [b.name for b in service.get_container_client("ckpt").list_blobs(name_starts_with="jobs/exported/")]
    assert "jobs/exported/commits/000000000003.json" in names
    assert account not in [c.name for c in service.list_containers()]


def test_an_account_option_that_contradicts_the_url_is_one_line(azurite: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="account_name: 'other' differs from the account in the URL"):
        CheckpointManager(f"az://{azurite['account_name']}/ckpt/p", store_options={**azurite, "account_name": "other"})
