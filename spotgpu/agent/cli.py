"""``spotgpu agent run|status|demo``: the node agent's commands.

``status`` and ``demo`` print a short summary, or the whole document with ``--json``.
A bad config file is one line on stderr and exit 2 (``spotgpu.config.ConfigError``,
printed by ``spotgpu``'s ``main()``); ``status`` exits 1 when no agent answers.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spotgpu.agent.config import AGENT_CONFIG_PATH, AgentConfig
from spotgpu.agent.control import parse_address
from spotgpu.agent.http import check_base_url
from spotgpu.catalogue import CLOUDS
from spotgpu.cliutil import (
    EXIT_CHECK_FAILED,
    Progress,
    UserError,
    add_json_flag,
    camel_keys,
    error_line,
    print_json,
    style,
)
from spotgpu.config import ConfigError, format_error
from spotgpu.contract.agent_status import AgentStatus

DEFAULT_CONFIG = AGENT_CONFIG_PATH


def load_config(path: str) -> AgentConfig:
    """Read the JSON the bootstrap wrote; errors name the file, the field and the fix."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}; fix: pass --config FILE") from None
    except ValueError as err:
        raise ConfigError(f"{path} is not JSON ({err}); fix: re-render the bootstrap") from None
    try:
        return AgentConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(format_error(err, namespace=path, model=AgentConfig, data=raw)) from None


def render_status(doc: dict[str, Any]) -> str:
    """The few lines an operator looks at first; ``--json`` has everything. A document that is not an
    agent's status (:class:`~spotgpu.contract.agent_status.AgentStatus`) raises ValueError naming the key."""
    status = AgentStatus.from_json(doc)
    workload, notice = status.workload, status.workload.notice
    deadline: str | None = None
    if notice is not None and notice.deadline is not None:
        left = notice.deadline - (workload.now or time.time())
        deadline = time.strftime("%H:%M:%SZ", time.gmtime(notice.deadline)) + (
            f" (in {left:.0f} s)" if left > 0 else " (passed)"
        )
    node = f"{status.instance_id or '?'} {status.instance_type or ''}".rstrip()
    lines = [
        f"pool:      {status.pool or '?'} ({status.provider or '?'})",
        f"node:      {node}",
        f"phase:     {style(workload.phase, 'green' if workload.accepting_work else 'yellow')}"
        f" (accepting work: {'yes' if workload.accepting_work else 'no'})",
        "notice:    "
        + (f"{notice.kind} from {notice.source}, deadline {deadline or '?'}" if notice else "none"),
    ]
    cleared = workload.cleared
    if notice is None and cleared is not None:
        when = time.strftime("%H:%M:%SZ", time.gmtime(cleared.cleared_at))
        lines[-1] += f" (the {cleared.kind} notice from {cleared.source} cleared at {when})"
    final = workload.final_report
    if final:
        saved = "committed" if final.committed else "NOT committed"
        lines.append(f"final checkpoint: {saved} {final.generation or ''}".rstrip())
    lines.append(f"events:    {len(status.events)} seen, {len(status.acknowledged)} acknowledged")
    return "\n".join(lines)


def _report(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:  # camelCase like every --json
        print_json(camel_keys(doc))
    else:
        print(render_status(doc))


def _checked_flag(flag: str, check: Callable[[str], object], value: str) -> None:
    """A bad flag is the user's mistake: one line naming the flag, the value and the fix (exit 2)."""
    try:
        check(value)
    except ValueError as err:
        raise UserError(f"{flag} {value!r}: {err}") from None


def cmd_run(args: argparse.Namespace) -> int:
    from spotgpu.agent.daemon import Agent

    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    config = load_config(args.config)
    if args.control:
        _checked_flag("--control", parse_address, args.control)
    if args.metadata_url:
        _checked_flag("--metadata-url", check_base_url, args.metadata_url)
        rt = config.effective_runtime().model_copy(update={"metadata_url": args.metadata_url})
        config = config.model_copy(update={"runtime": rt})
    agent = Agent(config, control_address=args.control)
    signal.signal(signal.SIGTERM, lambda *_: agent.stop_event.set())
    agent.run_forever()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from spotgpu.agent.client import ENV_ADDRESS, AgentClient

    if args.control:
        _checked_flag("--control", parse_address, args.control)
    try:
        client = AgentClient(args.control, register=False)
    except ValueError as err:  # $SPOTGPU_AGENT
        raise UserError(f"${ENV_ADDRESS}: {err}") from None
    try:
        status = client._call("GET", "/v1/status")
    except OSError as err:
        error_line(
            "spotgpu agent status",
            f"no agent at {client.address} ({err}); is spotgpu-agent.service running? (or pass --control ADDRESS)",
        )
        return EXIT_CHECK_FAILED
    try:
        _report(status, args.json)
    except ValueError as err:  # an agent of another version
        error_line("spotgpu agent status", f"the agent at {client.address} served a status this spotgpu cannot read: "
                   f"{err}; fix: run the spotgpu release the agent runs, or pass --json for the raw document")  # fmt: skip
        return EXIT_CHECK_FAILED
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run an agent against a loopback fake and raise one notice: a local drill."""
    from spotgpu.agent.config import AgentRuntime
    from spotgpu.agent.daemon import Agent
    from spotgpu.agent.fakes import FakeAwsImds, FakeAzureImds, FakeGcpMetadata
    from spotgpu.models.notice import default_notice

    fake = {"aws": FakeAwsImds, "gcp": FakeGcpMetadata, "azure": FakeAzureImds}[args.provider]().start()
    config = AgentConfig(
        provider=args.provider,
        pool="demo",
        notice=default_notice(args.provider).model_dump(mode="json", by_alias=True),
        checkpoint_store="file:///tmp/spotgpu-demo",
        checkpoint_interval_seconds=600,
        control_socket="127.0.0.1:0",
        telemetry_port=0,
        # With --json stdout carries one document, so the JSON-lines event log is off.
        runtime=AgentRuntime(metadata_url=fake.url, events_log=None if args.json else "-"),
    )
    agent = Agent(config).start()
    with Progress(f"demo on a fake {args.provider} metadata server") as progress:
        progress.update("agent starting")
        time.sleep(1.5)
        progress.update("notice raised, agent responding")
        if isinstance(fake, FakeAwsImds):
            fake.raise_spot(lead=20)
        elif isinstance(fake, FakeGcpMetadata):
            fake.raise_preempted()
        else:
            fake.raise_event(not_before_in=20)
        time.sleep(3.0)
    _report(agent.status(), args.json)
    agent.stop()
    fake.stop()
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("agent", help="the node agent: interruption notices, final checkpoint, drain, telemetry")
    cmds = p.add_subparsers(dest="agent_command", metavar="ACTION", required=True)

    run = cmds.add_parser("run", help="run the agent (what spotgpu-agent.service starts)")
    run.add_argument("--config", default=DEFAULT_CONFIG, help=f"agent config JSON (default {DEFAULT_CONFIG})")
    run.add_argument("--control", default=None, help="override the control address (Unix socket or 127.0.0.1:PORT)")
    run.add_argument("--metadata-url", default=None, help="override the metadata base URL (testing)")
    run.add_argument("-v", "--verbose", action="store_true", help="log at INFO on stderr (default: warnings only)")
    run.set_defaults(func=cmd_run)

    status = cmds.add_parser("status", help="print the running agent's state")
    status.add_argument("--control", default=None, help="control address (default: $SPOTGPU_AGENT or the socket)")
    add_json_flag(status, "the agent's whole status document")
    status.set_defaults(func=cmd_status)

    demo = cmds.add_parser("demo", help="raise one notice against a loopback fake metadata server")
    demo.add_argument("provider", choices=CLOUDS, help="which cloud's metadata server to fake")
    add_json_flag(demo, "the agent's status after the notice")
    demo.set_defaults(func=cmd_demo)
