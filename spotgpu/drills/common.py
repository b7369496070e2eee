"""What the three drills share: flags, exit codes, ``--json`` and ``--dry-run`` semantics.

Every ``spotgpu drill CLOUD`` takes ``--pool``, ``--poll-seconds``, ``--timeout-seconds``,
``--dry-run`` and ``--json``, and exits

- 0: the drill passed (or, with ``--dry-run``, everything resolved and nothing was changed);
- 1: the drill started and did not pass (failed, stopped, timed out, lost the API mid-way);
- 2: it could not start: a flag, no such pool/template/VM, no credentials, no SDK.

A dry run resolves and validates everything the real run would (the template or the MIG or the
scale set, the VM it would hit) with read-only calls, prints what it would do, and stops before
the one mutating call. The timeline is printed as it happens on stdout, or on stderr under
``--json``, so that stdout then carries exactly one JSON document.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spotgpu.cliutil import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    add_dry_run_flag,
    add_json_flag,
    add_seconds_flag,
    error_line,
    one_line,
    print_json,
    style,
)


class DrillError(Exception):
    """The drill could not start; the message says what to fix (exit 2)."""


class DrillFailed(DrillError):
    """The drill started (the interruption was requested) and did not pass (exit 1)."""


def add_drill_flags(
    parser: argparse.ArgumentParser, *, pool_help: str, poll_seconds: float, timeout_seconds: float, legacy: bool
) -> None:
    """The flags every drill has; ``legacy`` keeps ``--poll``/``--timeout`` as hidden aliases."""
    parser.add_argument("--pool", required=True, help=pool_help)
    add_seconds_flag(parser, "--poll-seconds", poll_seconds, "seconds between status polls", aliases=("--poll",) if legacy else ())
    add_seconds_flag(parser, "--timeout-seconds", timeout_seconds, "give up after this many seconds", aliases=("--timeout",))
    add_dry_run_flag(parser, "the target and the call it would make")
    add_json_flag(parser, "the drill's outcome and timeline")


@dataclass
class DrillOutput:
    """The drill's printed lines: echoed live, kept for ``--json``, with whether it has started."""

    cloud: str
    pool: str
    as_json: bool = False
    dry_run: bool = False
    lines: list[str] = field(default_factory=list)
    #: set once the mutating call (start experiment, preempt, evict) succeeded
    started: bool = False

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        stream = sys.stderr if self.as_json else sys.stdout
        if line.startswith(("drill passed", "drill FAILED", "dry run")):
            line = style(line, "green" if line.startswith("drill passed") else "red" if "FAILED" in line else "yellow", stream)
        print(line, file=stream, flush=True)

    def document(self, status: str, reason: str = "", **details: Any) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "pool": self.pool,
            "dryRun": self.dry_run,
            "status": status,
            "reason": reason,
            "started": self.started,
            **details,
            "log": self.lines,
        }


#: What a drill's body returns: ``passed``, ``failed`` or ``dry-run``, a reason, and details for --json.
Outcome = tuple[str, str, dict[str, Any]]


def raising(err: BaseException) -> Callable[[DrillOutput], Outcome]:
    """A body that fails at once, for errors met before the drill could be set up."""

    def body(_output: DrillOutput) -> Outcome:
        raise err

    return body


def finish(
    output: DrillOutput,
    body: Callable[[DrillOutput], Outcome],
    *,
    sdk_errors: tuple[type[BaseException], ...] = (),
    sdk_fix: str = "",
) -> int:
    """Run a drill's body and turn its outcome or error into the exit code, one line and --json."""
    prog = f"spotgpu drill {output.cloud}"
    try:
        status, reason, details = body(output)
    except DrillFailed as err:
        status, reason, details = "failed", str(err), {}
        error_line(prog, err)
    except DrillError as err:
        status, reason, details = "not-started", str(err), {}
        error_line(prog, err)
    except ImportError as err:
        status, reason, details = "not-started", f"needs {err.name or 'the cloud SDK'}; fix: pip install 'spotgpu[{output.cloud}]'", {}
        error_line(prog, reason)
    except sdk_errors as err:
        reason = f"{type(err).__name__}: {one_line(err)}" + (f"; fix: {sdk_fix}" if sdk_fix and not output.started else "")
        status, details = ("failed" if output.started else "not-started"), {}
        error_line(prog, reason)
    if output.as_json:
        print_json(output.document(status, reason, **details))
    return {"passed": EXIT_OK, "dry-run": EXIT_OK, "failed": EXIT_CHECK_FAILED}.get(status, EXIT_USAGE)
