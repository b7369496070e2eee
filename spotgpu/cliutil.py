"""What every ``spotgpu`` command shares: flag names, ``--json``, one-line errors, progress, colour.

Why one module: the CLI grew per area, and each area spelled the same thing its own way
(``--poll`` here, ``--poll-seconds`` there; JSON on some commands; tracebacks on others).
The rules, in one place:

- **Flags.** One spelling per concept (:data:`CANONICAL_FLAGS`). Old spellings stay as hidden,
  deprecated aliases (:func:`add_seconds_flag`) so scripts keep working; a test walks the whole
  parser tree and fails on a visible non-canonical spelling.
- **Output.** A command that reports something takes ``--json`` (:func:`add_json_flag`) and then
  prints exactly one JSON document on stdout (:func:`print_json`); human text goes to stdout
  otherwise, progress and diagnostics always to stderr.
- **Errors.** A user's mistake (bad flag, bad file, bad config, bad URL) is ONE line on stderr and
  exit 2 (:class:`UserError`, :func:`error_line`); exit 1 is kept for "the check this command
  performs failed" (a mandatory policy violation, a failed verification, a failed drill).
- **TTY only.** Progress (:class:`Progress`) and colour (:func:`style`) appear only when the stream
  is a terminal, and colour honours ``NO_COLOR`` (https://no-color.org), so CI logs stay clean.

This module must stay cheap to import (stdlib only): ``spotgpu --help`` imports it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn

from spotgpu.catalogue import names

#: Exit codes every command uses.
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # policy violation, failed verification, failed drill, no agent answering
EXIT_USAGE = 2  # the user's input: flags, files, config, URLs
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`| head`)

#: concept -> the one flag spelling every command uses for it.
CANONICAL_FLAGS: dict[str, str] = {
    "machine-readable output": "--json",
    "change nothing, show what would be done": "--dry-run",
    "seconds between polls": "--poll-seconds",
    "give up after this many seconds": "--timeout-seconds",
    "age before debris is deleted": "--grace-seconds",
    "config file": "--config",
    "trace group to replay or fit": "--trace-group",
}

#: Old spellings still accepted (hidden from --help, a note on stderr when used) -> canonical.
DEPRECATED_ALIASES: dict[str, str] = {
    "--poll": "--poll-seconds",
    "--timeout": "--timeout-seconds",
    "--hazard-traces": "--trace-group",  # spotgpu cost
    "--group": "--trace-group",  # spotgpu simulate
}


class UserError(Exception):
    """A mistake the user can fix; ``spotgpu`` prints it as one line and exits 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command, the problem and where help is.

    A value a flag's type refuses (:func:`whole`, :func:`number`, :func:`named`, :func:`host_port`)
    reads ``--nodes: 0 is below 1; fix: ...``: the flag, the value, the fix, before any work starts.
    """

    def error(self, message: str) -> NoReturn:
        message = _ARGUMENT.sub(r"\1: ", one_line(message))
        self.exit(EXIT_USAGE, f"{self.prog}: {message}; see `{self.prog} --help`\n")


#: argparse's "argument --nodes: " (or "argument --stack/-s: ") prefix, which becomes "--nodes: ".
_ARGUMENT = re.compile(r"^argument ([^:/]+)(?:/[^:]+)?: ")


def one_line(text: object) -> str:
    """Collapse a message to one line (multi-line SDK errors included)."""
    return "; ".join(part.strip() for part in str(text).strip().splitlines() if part.strip())


def error_line(prog: str, message: object, stream: IO[str] | None = None) -> None:
    """Print ``prog: message`` as one line on stderr."""
    print(f"{prog}: {one_line(message)}", file=stream or sys.stderr)


def fail(message: str) -> NoReturn:
    """Raise a :class:`UserError` (for code that prefers a call to a raise)."""
    raise UserError(message)


# --- flags ------------------------------------------------------------------------------------
#
# Every flag that takes a value checks it in its argparse ``type``: argparse runs the types
# while parsing, so a bad value is refused before the command does anything (reads a stack,
# asks a cloud for credentials, starts a server). tests/foundation/test_cli_flags.py fails on a
# visible flag typed with a bare ``int`` or ``float``.


class _Checked:
    """A flag type: converts the text, checks it, and names itself in argparse's messages."""

    def __init__(self, name: str, convert: Callable[[str], Any]) -> None:
        self.__name__ = name
        self._convert = convert

    def __call__(self, text: str) -> Any:
        return self._convert(text)

    def __repr__(self) -> str:
        return self.__name__


def _refuse(text: str, problem: str, fix: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"{text} {problem}; fix: {fix}")


def _bounds(low: float | None, high: float | None, *, above: bool) -> str:
    if low is not None and high is not None:
        return f"from {low:g} to {high:g}" if not above else f"above {low:g} and at most {high:g}"
    if low is not None:
        return f"above {low:g}" if above else f"of at least {low:g}"
    return f"of at most {high:g}" if high is not None else ""


def whole(minimum: int | None = None, maximum: int | None = None) -> Any:
    """A whole number in ``[minimum, maximum]`` (``--nodes``, ``--keep``, ``--port``)."""
    span = _bounds(minimum, maximum, above=False)

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            _refuse(text, "is not a whole number", f"use a whole number {span}".rstrip())
        if minimum is not None and value < minimum:
            _refuse(text, f"is below {minimum}", f"use a whole number {span}")
        if maximum is not None and value > maximum:
            _refuse(text, f"is above {maximum}", f"use a whole number {span}")
        return value

    return _Checked(f"whole {span}".strip(), convert)


def number(minimum: float | None = None, maximum: float | None = None, *, above: bool = False) -> Any:
    """A finite number in ``[minimum, maximum]`` (``above=True``: strictly above ``minimum``)."""
    span = _bounds(minimum, maximum, above=above)

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            _refuse(text, "is not a number", f"use a number {span}".rstrip())
        if value != value or value in (float("inf"), float("-inf")):
            _refuse(text, "is not a finite number", f"use a number {span}".rstrip())
        if minimum is not None and (value <= minimum if above else value < minimum):
            _refuse(text, f"is {'not above' if above else 'below'} {minimum:g}", f"use a number {span}")
        if maximum is not None and value > maximum:
            _refuse(text, f"is above {maximum:g}", f"use a number {span}")
        return value

    return _Checked(f"number {span}".strip(), convert)


#: A probability (``--notice-credit``): 0 to 1.
PROBABILITY = number(0.0, 1.0)
#: A duration (``--poll-seconds``, ``--timeout-seconds``): 0 or more.
SECONDS = number(0.0)


def named(pattern: str, what: str, fix: str) -> Any:
    """Text matching ``pattern`` in full (a stack or pool name); ``fix`` says what the text may hold."""
    rule = re.compile(pattern)

    def convert(text: str) -> str:
        if not rule.fullmatch(text):
            _refuse(repr(text), f"is not {what}", fix)
        return text

    return _Checked(what, convert)


#: ``--stack``: Pulumi's rule for a stack name (``pulumi stack init``), so ``Pulumi.<stack>.yaml`` is a file Pulumi reads.
STACK = named(r"[A-Za-z0-9_.-]{1,100}", "a Pulumi stack name",
              "use 1 to 100 letters, digits, '-', '_' or '.', e.g. prod-eu")  # fmt: skip
#: ``--pool``: a pool name as the stack config allows it (spotgpu.models.pools).
POOL = named(names.POOL_NAME, "a pool name", names.POOL_NAME_FIX)
#: A host name (RFC 1123 labels) or an IPv4 address; an IPv6 address goes in brackets.
_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)")


def _host_port(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        _refuse(repr(text), "has no port", f"use HOST:PORT, e.g. {text or '10.0.0.5'}:9464")
    if not _HOST.fullmatch(host):
        _refuse(repr(text), f"has no valid host ({host!r})", "use a host name or an IP address, e.g. 10.0.0.5:9464")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        _refuse(repr(text), f"has port {port!r}, not 1 to 65535", f"use e.g. {host}:9464")
    return text


#: ``HOST:PORT`` of a network endpoint (a scrape target).
HOST_PORT = _Checked("HOST:PORT", _host_port)



class _DeprecatedAlias(argparse.Action):
    """Stores into the canonical dest and says, once, which spelling to use instead."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None) -> None:
        canonical = DEPRECATED_ALIASES.get(option or "", "")
        print(f"{parser.prog}: {option} is deprecated; use {canonical}", file=sys.stderr)
        if self.const == "append":  # the canonical flag repeats: add to its list, never replace it
            values = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, values)


def add_json_flag(parser: argparse.ArgumentParser, what: str = "the result") -> None:
    """``--json``; ``what`` names the content only ("the generations"): the flag's help adds the rest."""
    if "JSON document" in what:
        raise ValueError(f"add_json_flag: say what is printed, not how ({what!r}); the help adds 'as one JSON document'")
    parser.add_argument("--json", action="store_true", help=f"print {what} as one JSON document on stdout")


def add_dry_run_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--dry-run", action="store_true", help=f"resolve and validate everything, print {what}, change nothing")


def add_deprecated_alias(parser: argparse.ArgumentParser, alias: str, canonical: str, **argument: Any) -> None:
    """Keep ``alias`` working for ``canonical`` (already added): hidden, same dest, a note when used.

    ``argument`` repeats what the value needs (``type=``); when ``canonical`` is an
    ``action="append"`` flag the alias appends to the same list.
    Register the pair in :data:`DEPRECATED_ALIASES` first; the parser-tree test checks it.
    """
    if DEPRECATED_ALIASES.get(alias) != canonical:
        raise ValueError(f"{alias} is not a registered deprecated alias of {canonical}")
    target = parser._option_string_actions[canonical]
    mode = "append" if isinstance(target, argparse._AppendAction) else None
    parser.add_argument(
        alias, dest=target.dest, default=argparse.SUPPRESS, action=_DeprecatedAlias, const=mode, help=argparse.SUPPRESS, **argument
    )


def add_seconds_flag(
    parser: argparse.ArgumentParser,
    canonical: str,
    default: float,
    help_text: str,
    *,
    aliases: Sequence[str] = (),
) -> None:
    """A ``--*-seconds`` number flag (0 or more: 0 polls at once, or gives up at the first check),
    plus hidden deprecated ``aliases`` that store into the same dest."""
    kind = SECONDS
    parser.add_argument(canonical, type=kind, default=default, metavar="S", help=f"{help_text} (default {default:g})")
    for alias in aliases:
        add_deprecated_alias(parser, alias, canonical, type=kind)


# --- output -----------------------------------------------------------------------------------


def print_json(doc: Any, stream: IO[str] | None = None) -> None:
    """One JSON document, indented, with a trailing newline; unknown types via ``str``."""
    out = stream or sys.stdout
    json.dump(doc, out, indent=2, default=str)
    out.write("\n")


#: A key in the old style: lower-case words joined by ``_`` (``instance_id``, ``job``'s ``work_hours``).
_SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")
#: A key in the one style every ``--json`` uses (camelCase, like Pulumi and the stack config).
CAMEL_KEY = re.compile(r"^[a-z][a-zA-Z0-9]*$")


def camel_case(key: str) -> str:
    """``work_hours`` -> ``workHours``; a key that is not snake_case is returned unchanged."""
    if not _SNAKE.match(key):
        return key
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def camel_keys(doc: Any, *, names_under: Sequence[str] = (), foreign: Sequence[str] = ()) -> Any:
    """``doc`` with every snake_case mapping key in camelCase: what every ``--json`` prints.

    ``names_under`` lists keys whose value maps *names* (pools, groups, generations) to
    documents: those names are data, kept as written; the documents under them are
    converted. ``foreign`` lists keys whose whole value is another tool's schema (a cloud
    provider's resource inputs): left exactly as it is. Only the camelCase key is printed: the
    project was never released, so no script reads an old spelling.
    Dataclasses and pydantic models are not handled here: dump them first.
    """
    names, kept = frozenset(names_under), frozenset(foreign)

    def convert(node: Any, names_here: bool = False) -> Any:
        if isinstance(node, dict):
            out: dict[Any, Any] = {}
            for key, value in node.items():
                if names_here or not isinstance(key, str):
                    out[key] = convert(value)
                    continue
                new = camel_case(key)
                converted = value if key in kept else convert(value, key in names)
                out[new] = converted
            return out
        if isinstance(node, list | tuple):
            return [convert(item) for item in node]
        return node

    return convert(doc)


def non_camel_keys(doc: Any, *, names_under: Sequence[str] = (), foreign: Sequence[str] = (), path: str = "") -> list[str]:
    """Paths of keys that break the style (for tests): every key that is not camelCase."""
    names, kept = frozenset(names_under), frozenset(foreign)
    found: list[str] = []

    def walk(node: Any, at: str, names_here: bool = False) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                where = f"{at}.{key}"
                if not names_here and isinstance(key, str) and not CAMEL_KEY.match(key):
                    found.append(where)
                if names_here or key not in kept:
                    walk(value, where, not names_here and key in names)
        elif isinstance(node, list | tuple):
            for i, item in enumerate(node):
                walk(item, f"{at}[{i}]")

    walk(doc, path or "$")
    return found


def is_tty(stream: IO[str] | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def colour_enabled(stream: IO[str] | None) -> bool:
    """Colour on a terminal only, never with ``NO_COLOR`` set (any value) or ``TERM=dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return is_tty(stream)


_CODES = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}


def style(text: str, colour: str, stream: IO[str] | None = None) -> str:
    """``text`` in ``colour`` if ``stream`` (default stdout) may have colour, else unchanged."""
    if not colour_enabled(stream if stream is not None else sys.stdout):
        return text
    return f"\033[{_CODES[colour]}m{text}\033[0m"


class Progress:
    """A one-line spinner with elapsed time on stderr, only when stderr is a terminal.

    Use it around work that may take more than a couple of seconds::

        with Progress("verifying") as progress:
            for i, gen in enumerate(gens):
                progress.update(f"{i + 1}/{len(gens)} {gen}")

    Off a terminal (CI, pipes, tests) every method is a no-op, so logs stay clean and
    stdout is never touched.
    """

    FRAMES = "|/-\\"

    def __init__(self, label: str, stream: IO[str] | None = None, *, interval: float = 0.1, enabled: bool | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = is_tty(self.stream) if enabled is None else enabled
        self.interval = interval
        self.detail = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._start = 0.0
        self._width = 0

    def __enter__(self) -> Progress:
        if self.enabled:
            self._start = time.monotonic()
            self._thread = threading.Thread(target=self._spin, name="spotgpu-progress", daemon=True)
            self._thread.start()
        return self

    def update(self, detail: str) -> None:
        self.detail = detail
        if self.enabled:
            self._draw(0)

    def __exit__(self, *exc: object) -> None:
        if not self.enabled:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

    def _spin(self) -> None:
        frame = 0
        while not self._stop.wait(self.interval):
            frame += 1
            self._draw(frame)

    def _draw(self, frame: int) -> None:
        elapsed = time.monotonic() - self._start
        line = f"{self.FRAMES[frame % len(self.FRAMES)]} {self.label} {elapsed:5.1f}s {self.detail}".rstrip()
        with self._lock:
            pad = max(0, self._width - len(line))
            self._width = len(line)
            self.stream.write("\r" + line + " " * pad)
            self.stream.flush()


def run_guarded(prog: str, func: Callable[[], int]) -> int:
    """Run ``func``; a :class:`UserError` becomes one line on stderr and exit 2.

    For areas that dispatch on their own; ``spotgpu``'s ``main()`` already does this (and
    also for ``spotgpu.config.ConfigError``) around every command.
    """
    try:
        return int(func() or 0)
    except UserError as err:
        error_line(prog, err)
        return EXIT_USAGE
