"""Boot policies/ exactly as the Pulumi CLI does and talk to it over gRPC on 127.0.0.1.

The CLI runs ``python -u -m pulumi.policy ENGINE PACK_DIR``; the pack prints its
port and serves the Analyzer service. This proves ``__main__.py``, the import
layout and the pack metadata load as they would under ``pulumi preview``.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from guard_helpers import EXPECTED_DEFAULTS, PACK_DIR, REPO
from pulumi.runtime.proto import analyzer_pb2 as proto
from pulumi.runtime.proto import analyzer_pb2_grpc

LEVELS = {proto.ADVISORY: "advisory", proto.MANDATORY: "mandatory"}
BAD_TEMPLATE_URN = "urn:pulumi:dev::p::aws:ec2/launchTemplate:LaunchTemplate::bad"


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(PACK_DIR)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.isdigit():
            proc.kill()
            raise AssertionError(f"pack did not print a port: {line!r}\n{proc.communicate(timeout=10)[1]}")
        channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        grpc.channel_ready_future(channel).result(timeout=30)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _bad_template() -> struct_pb2.Struct:
    props = struct_pb2.Struct()
    props.update({
        "instanceType": "g5.xlarge",
        "instanceMarketOptions": {"marketType": "spot"},
        "metadataOptions": {"httpTokens": "optional"},
        "userData": base64.b64encode(b"#!/bin/bash\nnvidia-smi\n").decode(),
    })
    return props


def test_analyzer_info_lists_every_rule_with_its_level(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == "spotgpu-guard"
    assert {p.name: LEVELS[p.enforcementLevel] for p in info.policies} == EXPECTED_DEFAULTS
    assert all(p.policy_type == proto.PolicyType.POLICY_TYPE_STACK for p in info.policies)


def test_bad_resource_is_rejected_over_grpc(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    options = proto.AnalyzerResourceOptions()
    per_resource = analyzer.Analyze(proto.AnalyzeRequest(
        type="aws:ec2/launchTemplate:LaunchTemplate", properties=_bad_template(), urn=BAD_TEMPLATE_URN, name="bad",
        options=options), timeout=30)
    # Every rule needs the whole stack (links, companions), so the per-resource pass is empty...
    assert list(per_resource.diagnostics) == []
    stack = analyzer.AnalyzeStack(proto.AnalyzeStackRequest(resources=[proto.AnalyzerResource(
        type="aws:ec2/launchTemplate:LaunchTemplate", properties=_bad_template(), urn=BAD_TEMPLATE_URN, name="bad",
        options=options)]), timeout=30)
    # ...and the stack pass, which the engine runs in preview too, rejects it.
    found = {(d.policyName, LEVELS[d.enforcementLevel], d.urn) for d in stack.diagnostics}
    assert ("spot-gpu-requires-checkpoint", "mandatory", BAD_TEMPLATE_URN) in found
    assert ("notice-handled", "mandatory", BAD_TEMPLATE_URN) in found
    messages = "\n".join(d.message for d in stack.diagnostics)
    assert "does not require IMDSv2" in messages and "does not start the node agent" in messages
