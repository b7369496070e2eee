"""``AgentClient.report_throughput``: arguments checked at the edge, the agent names the GPU model
from its own type, and docs/agent.md's "Step time per GPU model" loop runs exactly as written."""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agent_testkit import fast_config, wait_until

from spotgpu.agent.client import AgentClient
from spotgpu.agent.control import ControlServer
from spotgpu.agent.identity import VmIdentity, unknown_identity
from spotgpu.agent.state import WorkloadState
from spotgpu.agent.telemetry import AgentTelemetry, gpu_model_of
from spotgpu.contract.throughput import ARGUMENTS, KEYS, ThroughputReport
from tests.doc_blocks import block_after

MARKER = "<!-- tested: tests/agent/test_agent_throughput.py"


@pytest.fixture
def control() -> Iterator[ControlServer]:
    server = ControlServer("127.0.0.1:0", WorkloadState()).start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"step_seconds": 0.0}, "step_seconds: not a finite number above 0 (value: 0.0)"),
        ({"step_seconds": -1.5}, "step_seconds: not a finite number above 0 (value: -1.5)"),
        ({"step_seconds": math.nan}, "step_seconds: not a finite number above 0 (value: nan)"),
        ({"step_seconds": math.inf}, "step_seconds: not a finite number above 0 (value: inf)"),
        ({"step_seconds": "0.5"}, "step_seconds: not a finite number above 0 (value: '0.5')"),
        ({"step_seconds": True}, "step_seconds: not a finite number above 0 (value: True)"),
        ({"step_seconds": 0.5, "steps": 0}, "steps: not a whole number of at least 1 (value: 0)"),
        ({"step_seconds": 0.5, "steps": 2.5}, "steps: not a whole number of at least 1 (value: 2.5)"),
        ({"step_seconds": 0.5, "steps": True}, "steps: not a whole number of at least 1 (value: True)"),
        ({"step_seconds": 0.5, "gpu_model": " "}, "gpu_model: not a GPU model name of 1 to 64 characters (value: ' ')"),
        ({"step_seconds": 0.5, "gpu_model": "x" * 65}, "gpu_model: not a GPU model name of 1 to 64 characters (value: 'xxx"),
    ],
)  # fmt: skip
def test_bad_arguments_raise_naming_the_argument_the_value_and_the_fix(kwargs: dict[str, Any], named: str) -> None:
    client = AgentClient("127.0.0.1:1", timeout=0.2, register=False)
    with pytest.raises(ValueError) as err:
        client.report_throughput(**kwargs)
    line = str(err.value)
    assert line.startswith(f"report_throughput.{named}") and "; fix: use " in line and "\n" not in line


def test_numpy_numbers_are_step_times() -> None:
    seen: list[Any] = []
    server = ControlServer("127.0.0.1:0", WorkloadState(), on_throughput=seen.append).start()
    try:
        AgentClient(server.url, register=False).report_throughput(np.float32(0.25), steps=np.int64(8))
    finally:
        server.stop()
    assert [(s.step_seconds, s.steps, s.gpu_model) for s in seen] == [(0.25, 8, None)]


def test_no_agent_means_the_report_is_dropped_not_raised() -> None:
    AgentClient("127.0.0.1:1", timeout=0.2, register=False).report_throughput(0.5, steps=100)


def test_the_endpoint_refuses_a_bad_body_naming_the_field_and_counts_as_contact(control: ControlServer) -> None:
    client = AgentClient(control.url, register=False)
    for body, field in (({"stepSeconds": 0}, "stepSeconds: not a finite number above 0 (value: 0)"),
                        ({"stepSeconds": 1, "steps": 0}, "steps: not a whole number of at least 1 (value: 0)"),
                        ({"stepSeconds": 1, "gpuModel": 7}, "gpuModel: not a GPU model name of 1 to 64 characters (value: 7)"),
                        ({}, "stepSeconds: not a finite number above 0 (value: None)")):  # fmt: skip
        with pytest.raises(RuntimeError, match=f"400 .*{re.escape('throughput.' + field)}; fix: use "):
            client._call("POST", "/v1/throughput", body)
    assert control.state.workload_seen_at is None  # a refused body is not a workload's report
    client.report_throughput(0.5)
    assert control.state.workload_seen_at is not None  # the agent waits for a workload that reports


@pytest.mark.parametrize(
    ("step_seconds", "steps", "gpu_model"),
    [(0, 1, None), (-2, 1, None), (True, 1, None), (1, 0, None), (1, True, None), (1, 3, " "), (1, 3, "x" * 65)],
)
def test_the_client_and_the_agent_refuse_a_value_in_the_same_words(
    control: ControlServer, step_seconds: Any, steps: Any, gpu_model: Any
) -> None:
    """One set of rules (``spotgpu.contract.throughput``): the client's ValueError and the agent's 400 for
    the same bad value are the same line but the name (the argument's, the body key's)."""
    client = AgentClient(control.url, register=False)
    with pytest.raises(ValueError) as raised:
        client.report_throughput(step_seconds, steps=steps, gpu_model=gpu_model)
    host, port = control.url.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        body = {"stepSeconds": step_seconds, "steps": steps, "gpuModel": gpu_model}
        conn.request("POST", "/v1/throughput", json.dumps(body), {"Content-Type": "application/json"})
        reply = conn.getresponse()
        status, served = reply.status, json.loads(reply.read())["error"]
    finally:
        conn.close()
    assert status == 400
    argument, said = str(raised.value).split(": ", 1)
    key, served_said = served.split(": ", 1)
    assert said == served_said
    assert (argument.split(".")[1], key.split(".")[1]) in set(zip(ARGUMENTS, KEYS, strict=True))


def test_the_agent_strips_the_gpu_model_and_reads_a_body_without_steps_as_one_step() -> None:
    seen: list[Any] = []
    server = ControlServer("127.0.0.1:0", WorkloadState(), on_throughput=seen.append).start()
    try:
        client = AgentClient(server.url, register=False)
        client._call("POST", "/v1/throughput", {"stepSeconds": 0.5})  # an older client's body may leave steps out
        client.report_throughput(0.25, steps=4, gpu_model="  A100 40GB ")
    finally:
        server.stop()
    assert seen == [ThroughputReport(0.5, 1, None), ThroughputReport(0.25, 4, "A100 40GB")]


@pytest.mark.parametrize(
    ("provider", "instance_type", "model"),
    [("aws", "g5.12xlarge", "A10G"), ("aws", "p4d.24xlarge", "A100"), ("gcp", "a2-highgpu-1g", "A100 40GB"),
     ("gcp", "n1-standard-8", None), ("azure", "Standard_NC4as_T4_v3", "T4"), ("aws", "m5.large", None)],
)  # fmt: skip
def test_the_catalogue_names_the_model_of_the_vms_type(provider: str, instance_type: str, model: str | None) -> None:
    ident = VmIdentity(provider, "id", instance_type, "z", "r", "spot")
    assert gpu_model_of(ident) == model
    assert gpu_model_of(unknown_identity(provider)) is None  # the identity is not read yet


@pytest.mark.timeout(60)
def test_the_agent_logs_the_step_time_with_its_own_gpu_model(fakes: Any, agents: Any, tmp_path: Path) -> None:
    fake = fakes("aws")
    fake.identity["instance-type"] = "g5.12xlarge"
    log = tmp_path / "events.jsonl"
    agent = agents(fast_config("aws", fake.url), telemetry=AgentTelemetry(str(log)))
    wait_until(lambda: agent.identity.instance_type == "g5.12xlarge")
    client = AgentClient(agent.control.url, register=False)
    client.report_throughput(0.75, steps=200)
    client.report_throughput(0.5, steps=100, gpu_model="A10G 24GB")
    records = [json.loads(x) for x in log.read_text().splitlines() if '"record": "throughput"' in x]
    assert [(r["stepSeconds"], r["steps"], r["gpuModel"], r["gpuModelSource"]) for r in records] == [
        (0.75, 200, "A10G", "catalogue"), (0.5, 100, "A10G 24GB", "client")]  # fmt: skip
    sample = agent.telemetry.registry.get_sample_value
    assert sample("spotgpu_agent_step_seconds", {"gpu_model": "A10G"}) == 0.75
    assert sample("spotgpu_agent_training_steps_total", {"gpu_model": "A10G"}) == 200


#: The names the documented block takes from the loop around it, given here: a 2 ms "step".
_RUN_DOCS_BLOCK = (
    "import runpy, sys, time\n"
    "runpy.run_path(sys.argv[1], run_name='__main__', init_globals="
    "{'train_one_step': lambda: time.sleep(0.002), 'start': 0, 'total_steps': 600})\n"
)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("local_rank", "reports"), [(None, 3), ("0", 3), ("1", 0)])
def test_the_documented_loop_reports_once_a_window_from_local_rank_0(
    fakes: Any, agents: Any, tmp_path: Path, local_rank: str | None, reports: int
) -> None:
    fake = fakes("gcp")  # its machine type, g2-standard-8, carries one L4
    log = tmp_path / "events.jsonl"
    agent = agents(fast_config("gcp", fake.url), telemetry=AgentTelemetry(str(log)))
    wait_until(lambda: agent.identity.instance_type)
    script = tmp_path / "train.py"
    script.write_text(block_after("agent.md", MARKER))
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"}
    env.update({"SPOTGPU_AGENT": agent.control.url, **({"LOCAL_RANK": local_rank} if local_rank is not None else {})})
    done = subprocess.run([sys.executable, "-c", _RUN_DOCS_BLOCK, str(script)], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(x) for x in log.read_text().splitlines() if '"record": "throughput"' in x]
    assert len(records) == reports
    for r in records:
        assert (r["steps"], r["gpuModel"], r["gpuModelSource"]) == (200, "L4", "catalogue")
        assert 0.002 <= r["stepSeconds"] < 0.05  # the mean of the window's 2 ms steps, loop included
