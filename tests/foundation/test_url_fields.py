"""No credentials in any URL-typed config field; each kind parses as what it is (issue 31, item 4).

Defects: ``agentPackage: "spotgpu[aws] @ https://deploy:TOKEN@artifacts.example.com/..."``
previewed with no violation and the token landed in plain text in the GCP instance templates'
metadata and base64 in the AWS launch templates' userData; ``controller.image:
https://robot:TOKEN@ghcr.io/...`` was accepted though it is not even an image reference;
``agentPackage: "https://host/not a wheel"`` was accepted and would fail on every boot.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from spotgpu.agent.config import AgentConfig
from spotgpu.config import ConfigError, parse_stack_config, read_stack_file
from spotgpu.controller.config import parse_controller_config
from spotgpu.models.urls import check_image, check_package, credentials_in, redact

REPO = Path(__file__).resolve().parents[2]
RAW, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.dev.yaml"))
TOKEN_WHEEL = "spotgpu[aws] @ https://deploy:TOKEN123@artifacts.example.com/spotgpu-0.1.0-py3-none-any.whl"


def stack_error(pool: str, key: str, value: Any) -> str:
    raw = copy.deepcopy(RAW)
    next(p for p in raw["pools"] if p["name"] == pool)[key] = value
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw)
    return str(err.value)


def test_a_token_in_agent_package_is_refused_redacted_with_the_keyring_fix() -> None:
    line = stack_error("dev-aws", "agentPackage", TOKEN_WHEEL)
    assert line.startswith("spotgpu:pools[dev-aws].agentPackage: carries credentials in a URL")
    assert "TOKEN123" not in line and "deploy" not in line and "https://***@artifacts.example.com" in line
    assert "fix: publish the wheel to a pip index" in line and "keyring" in line and "\n" not in line


def test_agent_package_must_be_a_requirement_or_a_wheel() -> None:
    line = stack_error("dev-aws", "agentPackage", "https://host/not a wheel")
    assert "agentPackage: is neither a pip requirement nor a wheel's URL" in line and "fix: give a requirement" in line
    for bad in ("https://host/spotgpu.tar.gz", "ftp://host/spotgpu-0.1.0-py3-none-any.whl", "not a package at all"):
        with pytest.raises(ValueError):
            check_package(bad)
    for good in ("spotgpu", "spotgpu[aws]==0.1.0", "spotgpu[aws,torch]>=0.1,<0.2",
                 "spotgpu[aws] @ https://artifacts.example.com/spotgpu-0.1.0-py3-none-any.whl",
                 "https://artifacts.example.com/spotgpu-0.1.0-py3-none-any.whl",
                 "/opt/wheels/spotgpu-0.1.0-py3-none-any.whl", "spotgpu @ git+ssh://git@github.com/acme/spotgpu.git"):  # fmt: skip
        assert check_package(good) == good


def test_controller_image_is_an_image_reference_without_credentials() -> None:
    line = stack_error("dev-gcp", "controller", {"image": "https://robot:TOKEN123@ghcr.io/acme/controller:1"})
    assert "controller.image: carries credentials" in line and "TOKEN123" not in line
    assert "fix: give the plain reference" in line and "Artifact Registry Reader" in line
    line = stack_error("dev-gcp", "controller", {"image": "https://ghcr.io/acme/controller:1"})
    assert "controller.image: is not a container image reference; an image reference has no scheme" in line
    for good in ("ghcr.io/acme/controller:1", "us-docker.pkg.dev/p/spotgpu/controller:0.1.0", "acme/ctl",
                 "registry.local:5000/ctl@sha256:" + "a" * 64, "mcr.microsoft.com/azure-cli"):  # fmt: skip
        assert check_image(good) == good
    for bad in ("Controller:1", "ghcr.io/acme/controller:", "ghcr.io//x"):
        with pytest.raises(ValueError):
            check_image(bad)


def test_store_urls_and_endpoints_refuse_credentials_everywhere() -> None:
    config = {"provider": "gcp", "pool": "p", "notice": {"provider": "gcp"}, "checkpointStore": "gs://b/p",
              "checkpointIntervalSeconds": 60}  # fmt: skip
    for key, value in (("checkpointStore", "https://acct:KEY123@acct.blob.core.windows.net/c/p"),
                       ("controlStore", "s3://AKIA:SECRET123@bucket/p")):  # fmt: skip
        with pytest.raises(ValueError) as err:
            AgentConfig.model_validate({**config, key: value})
        assert "credentials" in str(err.value)
    with pytest.raises(ValueError):
        AgentConfig.model_validate({**config, "runtime": {"metadataUrl": "http://u:p@169.254.169.254"}})
    doc = yaml.safe_load((REPO / "tests" / "controller" / "controller.example.yaml").read_text())
    for change in ({"stateUrl": "s3://AKIA:SECRET123@bucket/ctl"}, {"stateUrl": "ftp://u:SECRET123@host/x"}):
        with pytest.raises(ConfigError) as err:
            parse_controller_config({**doc, **change})
        assert "SECRET123" not in str(err.value) and "***@" in str(err.value), str(err.value)
    pools = copy.deepcopy(doc["pools"])
    pools[0]["queueUrl"] = "https://user:SECRET123@sqs.us-east-1.amazonaws.com/1/q"
    with pytest.raises(ConfigError) as err:
        parse_controller_config({**doc, "pools": pools})
    assert "SECRET123" not in str(err.value) and "queueUrl: carries credentials" in str(err.value)
    pools = copy.deepcopy(doc["pools"])
    azure = next(p for p in pools if p["cloud"] == "azure")
    azure["eventsQueueUrl"] = "https://user:SECRET123@acct.queue.core.windows.net/q"  # accepted as given before
    with pytest.raises(ConfigError) as err:
        parse_controller_config({**doc, "pools": pools})
    assert "SECRET123" not in str(err.value) and "eventsQueueUrl: carries credentials" in str(err.value), str(err.value)


def test_a_gang_command_with_credentials_is_refused() -> None:
    assert credentials_in("--ckpt s3://AKIA:SECRET@bucket/x") and not credentials_in("git+ssh://git@github.com/a/b")
    assert redact("x https://a:b@h/p y https://c@h2/") == "x https://***@h/p y https://***@h2/"
    # through the stack's gang block, as a user writes it (the field, not only the helpers)
    raw, _ = read_stack_file(str(REPO / "stacks" / "Pulumi.prod.yaml"))
    pool = next(p for p in raw["pools"] if p["cloud"] == "aws")
    pool["gang"] = {"command": ["python", "train.py", "--ckpt", "s3://AKIA:SECRET123@bucket/x"], "nodes": 2}
    with pytest.raises(ConfigError) as err:
        parse_stack_config(raw)
    assert "SECRET123" not in str(err.value) and "gang.command" in str(err.value) and "***@" in str(err.value), str(err.value)


@pytest.mark.timeout(300)
def test_the_preview_refuses_a_token_before_any_boot_data_is_rendered(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", project)
    shutil.copytree(REPO / "stacks", project / "stacks")
    stack = project / "stacks" / "Pulumi.dev.yaml"
    doc = yaml.safe_load(stack.read_text())
    doc["config"]["spotgpu:pools"][1]["agentPackage"] = TOKEN_WHEEL.replace("[aws]", "[gcp]")
    stack.write_text(yaml.safe_dump(doc))
    run = subprocess.run([sys.executable, "-m", "spotgpu", "preview", "--program", str(project), "--stack", "dev", "--json"],
                         capture_output=True, text=True, timeout=240)  # fmt: skip
    assert run.returncode == 2 and run.stdout == ""
    assert "TOKEN123" not in run.stderr and "agentPackage: carries credentials" in run.stderr
    assert json.dumps(doc).count("TOKEN123") == 1  # the test put it in; nothing printed it back
