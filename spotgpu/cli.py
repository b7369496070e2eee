"""The ``spotgpu`` command: a thin, lazy dispatcher over per-area subcommand modules.

Each area owns a module with ``register(subparsers)`` that adds its command and sets
``func(args) -> int``. :data:`COMMANDS` is a static table, so ``spotgpu --help`` lists every
command without importing any area (``preview`` would otherwise pull in the Pulumi SDK, about a
second, and the cost model numpy). An area's module is imported only when its command runs or
its own ``--help`` is asked for. An area whose optional dependencies are not installed (the
Pulumi extra on a GPU VM, say) still shows up and says which extra to install, on
``spotgpu --help`` (found without importing it) and when it is run.

Errors: every user mistake (usage, a config file, a URL) is ONE line on stderr and exit 2,
never a traceback; see :mod:`spotgpu.cliutil` for the exit codes.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from spotgpu import __version__
from spotgpu.cliutil import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, OneLineParser, UserError, error_line


@dataclass(frozen=True)
class Command:
    module: str
    help: str
    #: extra that brings the module's import-time dependencies, and a package that proves it is there
    extra: str = ""
    needs: str = ""


#: command -> where it lives; the order is the order of ``spotgpu --help``.
COMMANDS: dict[str, Command] = {
    "preview": Command(
        "spotgpu_pulumi.offline.cli", "offline preview of a stack: resource tree, policy verdicts, economics", "pulumi", "pulumi"
    ),
    "init": Command(
        "spotgpu_pulumi.offline.init_cli", "start a Pulumi project for spot GPU pools from the template, offline", "pulumi", "pulumi"
    ),
    "ckpt": Command("spotgpu.checkpoint.cli", "list, verify and garbage-collect checkpoint generations"),
    "agent": Command("spotgpu.agent.cli", "the node agent: interruption notices, final checkpoint, drain, telemetry"),
    "cost": Command("spotgpu.simulation.cost_cli", "effective spot cost of a workload profile, term by term"),
    "simulate": Command("spotgpu.simulation.cli", "replay spot traces for a job under several policies"),
    "profile": Command("spotgpu.economics.profile_cli", "measure a workload profile from the fleet's telemetry"),
    "controller": Command("spotgpu.controller.cli", "run the fallback controller (the replacement ladder)"),
    "gang": Command("spotgpu.gang.launch", "launch multi-node gang jobs (torchrun by exit code) and host their rendezvous store"),
    "drill": Command("spotgpu.drills.cli", "provoke a spot interruption on one VM of a pool and follow it"),
    "observability": Command(
        "spotgpu.observability.cli", "the Grafana dashboard, Prometheus alert rules and per-cloud scrape configs"
    ),
}


def _missing(command: str, extra: str, error: ImportError) -> object:
    def run(_args: argparse.Namespace) -> int:
        hint = f"pip install 'spotgpu[{extra}]'" if extra else "reinstall spotgpu"
        error_line(f"spotgpu {command}", f"needs a package that is not installed ({error.name}); fix: {hint}")
        return EXIT_USAGE

    return run


def _help_for(command: Command) -> str:
    if command.needs and importlib.util.find_spec(command.needs) is None:  # finds, does not import
        return f"{command.help} (needs: pip install 'spotgpu[{command.extra}]')"
    return command.help


def build_parser(load: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser; ``load`` names the commands whose modules are imported (default: all).

    Commands not loaded get a placeholder that only carries their one-line help, which is all
    ``spotgpu --help`` needs.
    """
    wanted = set(COMMANDS) if load is None else set(load)
    modules = {COMMANDS[name].module for name in wanted if name in COMMANDS}
    wanted |= {name for name, command in COMMANDS.items() if command.module in modules}  # cost + simulate
    parser = OneLineParser(prog="spotgpu", description="Run GPU work on spot capacity safely.")
    parser.add_argument("--version", action="version", version=f"spotgpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    registered: set[str] = set()
    for name, command in COMMANDS.items():
        if name in registered:
            continue
        if name not in wanted:
            sub.add_parser(name, help=_help_for(command), add_help=False)
            continue
        try:
            module = importlib.import_module(command.module)
        except ModuleNotFoundError as err:  # an extra (or, for a broken install, the area) is missing
            stub = sub.add_parser(name, help=f"(needs the {command.extra or 'core'} extra)")
            stub.set_defaults(func=_missing(name, command.extra, err), accepts_extra_args=True)
            registered.add(name)
            continue
        before = set(sub.choices)
        module.register(sub)
        registered |= set(sub.choices) - before
    describe(parser)
    return parser


def describe(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command without a description its one-line help as one, so that
    ``spotgpu cost --help`` says what ``cost`` does, as ``spotgpu --help`` does."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, child in action.choices.items():
            if not child.description and helps.get(name):
                text = str(helps[name]).rstrip(".")
                child.description = text[:1].upper() + text[1:] + "."
            describe(child)


def _command_in(argv: Sequence[str]) -> str | None:
    """The command word, if any: the first argument that is not an option."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
        if arg in ("-h", "--help", "--version"):
            return None
    return None


def _prog_of(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """``spotgpu ckpt list``: the subcommand path the user typed, for one-line errors."""
    words = iter(a for a in argv if not a.startswith("-"))
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        word = next(words, None)
        if not subs or word is None or word not in subs[0].choices:
            return parser.prog
        parser = subs[0].choices[word]


def _user_error(err: BaseException) -> str | None:
    """The one line to print if ``err`` is the user's mistake, else None (a bug: traceback).

    Checks classes only if their module is already loaded: an error cannot be a
    ``ConfigError`` if ``spotgpu.config`` was never imported, and importing pydantic here
    would slow every command down.
    """
    if isinstance(err, UserError):
        return str(err)
    config = sys.modules.get("spotgpu.config")
    if config is not None and isinstance(err, config.ConfigError):
        return str(err)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(err, pydantic.ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        from spotgpu.models.urls import redact  # only on an error: never slows a command down

        return redact(f"{where} = {first.get('input')!r}: {first['msg']}")
    if isinstance(err, (FileNotFoundError, IsADirectoryError, PermissionError, NotADirectoryError)) and err.filename:
        return f"{err.filename}: {err.strerror}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_in(argv)
    parser = build_parser([command] if command in COMMANDS else [])
    prog = _prog_of(parser, argv)
    try:
        args, unknown = parser.parse_known_args(argv)
    except SystemExit as exit_:  # --help, --version, or a usage error already printed as one line
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else EXIT_USAGE
    if unknown and not getattr(args, "accepts_extra_args", False):
        error_line(prog, f"unrecognized arguments: {' '.join(unknown)}; see `{prog} --help`")
        return EXIT_USAGE
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except SystemExit as exit_:  # `raise SystemExit("message")` would print it and exit 1
        if isinstance(exit_.code, str):
            error_line(prog, exit_.code.removeprefix(f"{prog}: "))
            return EXIT_USAGE
        raise
    except BrokenPipeError:  # `spotgpu ckpt list URL --json | head`: the reader left; exit like SIGPIPE
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit does not raise again
        return EXIT_BROKEN_PIPE
    except Exception as err:
        line = _user_error(err)
        if line is None:
            raise
        error_line(prog, line)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
