"""The controller's state store takes the same URL forms as a checkpoint store (issue 24: one
fact, one place): one parser (``spotgpu.storage.urls.parse_store_url``), Azure as
``az://ACCOUNT/CONTAINER/PREFIX``. Defect: the controller read ``az://X/...`` as container X
with the account from the environment, the checkpoint library as account X."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from spotgpu.bootstrap import control_store_url
from spotgpu.contract.state_store import ObjectJsonStore


def test_a_plain_path_and_file_url_name_the_same_directory(tmp_path: Path) -> None:
    ObjectJsonStore(str(tmp_path / "state")).put("controller/record.json", {"version": 1})
    assert ObjectJsonStore((tmp_path / "state").as_uri()).get("controller/record.json") == {"version": 1}


def test_credentials_in_a_state_url_are_refused_without_echoing_them() -> None:
    with pytest.raises(ValueError) as err:
        ObjectJsonStore("s3://AKIAEXAMPLE:hunter2@bucket/p")
    assert "hunter2" not in str(err.value) and "credentials" in str(err.value)


@pytest.mark.azurite
def test_the_checkpoint_stores_azure_form_opens_on_azurite(azurite: dict[str, Any]) -> None:
    prefix = f"state-{uuid.uuid4().hex[:8]}"
    options = {k: v for k, v in azurite.items() if k != "account_name"}
    az = ObjectJsonStore(f"az://devstoreaccount1/ckpt/{prefix}/_controller", **options)
    az.put("controller/record.json", {"version": 1, "pools": {}})
    # what the components export as controllerStateUrl names the same objects
    exported = control_store_url(f"az://devstoreaccount1/ckpt/{prefix}")
    assert exported == f"https://devstoreaccount1.blob.core.windows.net/ckpt/{prefix}/_controller"
    assert ObjectJsonStore(f"az://devstoreaccount1/ckpt/{prefix}/_controller", **azurite).get(
        "controller/record.json"
    ) == {"version": 1, "pools": {}}


def test_the_old_two_segment_azure_form_is_one_line_with_the_new_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    with pytest.raises(ValueError) as err:
        ObjectJsonStore("az://ckpt/train/_controller")
    line = str(err.value)
    assert "\n" not in line and "az://acct/ckpt/train/_controller" in line and "first segment is the account" in line
