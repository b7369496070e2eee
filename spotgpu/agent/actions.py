"""The optional ways to reach a workload besides the control endpoint.

Some workloads cannot link the client: for them the agent can send a signal to
their process group (registered over the control endpoint or read from a PID
file) and run a hook command. Both are best effort and never block the drain
beyond the time left before the deadline.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence

log = logging.getLogger(__name__)


def parse_signal(name: str | None) -> signal.Signals | None:
    """``"SIGUSR1"``, ``"USR1"`` or ``"10"`` to a signal; None stays None."""
    if not name:
        return None
    text = name.upper()
    if text.isdigit():
        return signal.Signals(int(text))
    if not text.startswith("SIG"):
        text = "SIG" + text
    try:
        return signal.Signals[text]
    except KeyError:
        raise ValueError(f"unknown signal {name!r}; fix: use a name like SIGUSR1 or SIGTERM") from None


def read_pid_file(path: str | None) -> int | None:
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def signal_groups(sig: signal.Signals | None, pgids: Iterable[int]) -> list[int]:
    """Send ``sig`` to each process group; returns the groups reached."""
    reached: list[int] = []
    if sig is None:
        return reached
    for pgid in sorted(set(pgids)):
        try:
            os.killpg(pgid, sig)
            reached.append(pgid)
        except (ProcessLookupError, PermissionError) as err:
            log.warning("signal %s to process group %s failed: %s", sig.name, pgid, err)
    return reached


def start_hook(argv: Sequence[str] | None, env: Mapping[str, str]) -> subprocess.Popen[bytes] | None:
    """Start a hook command without waiting (the notice path must not block on it)."""
    if not argv:
        return None
    try:
        return subprocess.Popen(list(argv), env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    except OSError as err:
        log.warning("hook %s failed to start: %s", argv[0], err)
        return None


def run_hook(argv: Sequence[str] | None, env: Mapping[str, str], deadline: float) -> int | None:
    """Run a hook until it exits or ``deadline`` (Unix time); returns its exit code or None."""
    proc = start_hook(argv, env)
    if proc is None:
        return None
    try:
        return proc.wait(timeout=max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        log.warning("hook %s ran past the deadline and was killed", argv[0] if argv else "?")
        return None
