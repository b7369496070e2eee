"""Pure pieces of the pack: unknown-aware values, store URLs, ladders, and one rule called directly."""

from __future__ import annotations

import base64
import gzip

import pytest
from pulumi_policy import PolicyResource, PolicyResourceOptions, StackValidationArgs
from pulumi_policy.policy import PolicyCustomTimeouts
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy
from spotgpu_guard.catalog import parse_store_url
from spotgpu_guard.ladder import ladder_problems
from spotgpu_guard.rules_notice import RULES as NOTICE_RULES
from spotgpu_guard.values import UNKNOWN, decode_bootstrap, dig, plain

from spotgpu.contract.tags import AGENT_MARKER, decode_ladder


def test_plain_turns_proxy_unknowns_into_markers_instead_of_raising() -> None:
    proxied = unknown_checking_proxy({"a": {"b": UNKNOWN_STRING_VALUE, "c": [1, UNKNOWN_STRING_VALUE]}, "d": "x"})
    value = plain(proxied)
    assert value == {"a": {"b": UNKNOWN, "c": [1, UNKNOWN]}, "d": "x"}
    assert dig(value, "a", "b") is UNKNOWN
    assert dig(value, "a", "b", "deeper") is UNKNOWN
    assert dig(value, "a", "missing") is None
    assert dig(value, "a", "c", 5) is None


def test_decode_bootstrap_handles_base64_gzip_and_plain_text() -> None:
    script = f"#!/bin/bash\nsystemctl enable --now {AGENT_MARKER}\n"
    assert decode_bootstrap(base64.b64encode(script.encode()).decode()) == script
    assert decode_bootstrap(base64.b64encode(gzip.compress(script.encode())).decode()) == script
    assert decode_bootstrap(script) == script
    assert decode_bootstrap(UNKNOWN) is UNKNOWN


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://ckpt-bucket/pool-a", ("aws", "ckpt-bucket")),
        ("gs://ml-ckpt", ("gcp", "ml-ckpt")),
        ("az://spotgpuckpt/checkpoints/pool", ("azure", "spotgpuckpt")),
        ("https://spotgpuckpt.blob.core.windows.net/checkpoints", ("azure", "spotgpuckpt")),
        ("ckpt-bucket", None),
        ("file:///tmp/ckpt", None),
    ],
)
def test_parse_store_url(url: str, expected: tuple[str, str] | None) -> None:
    assert parse_store_url(url) == expected


def test_ladder_problems_accepts_a_sound_ladder_and_names_each_fault() -> None:
    assert ladder_problems(decode_ladder("sp:600:3.5;az:600:3.5;od:3600:7;qd:86400:0")) == []
    problems = ladder_problems(decode_ladder("od:0:7;sp:600:-1"))
    text = " | ".join(problems)
    assert "step 1 (on_demand) waits 0 s" in text
    assert "step 2 (same_pool) has cost ceiling -1" in text
    assert "out of order" in text
    assert "ends on same_pool" in text
    assert ladder_problems([]) == ["the ladder has no steps"]


def _resource(typ: str, props: dict, name: str) -> PolicyResource:
    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    return PolicyResource(typ, unknown_checking_proxy(props), f"urn:pulumi:s::p::{typ}::{name}", name, opts,
                          None, None, [], {})


def test_rule_called_directly_with_sdk_args_reports_unknown_user_data_itself() -> None:
    """Level-1 test: the SDK's own args and proxies, no harness."""
    template = _resource("aws:ec2/launchTemplate:LaunchTemplate", {
        "instanceType": "p5.48xlarge", "userData": UNKNOWN_STRING_VALUE,
        "instanceMarketOptions": {"marketType": "spot"}, "metadataOptions": {"httpTokens": "optional"}}, "lt")
    notice_handled = next(p for p in NOTICE_RULES if p.name == "notice-handled")
    reported: list[tuple[str, str | None]] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append((message, urn))

    notice_handled.validate(StackValidationArgs([template], {}), report)
    messages = [m for m, _ in reported]
    assert any("does not require IMDSv2" in m for m in messages)
    assert any("bootstrap" in m and "unknown until apply" in m for m in messages)
    assert {urn for _, urn in reported} == {template.urn}
