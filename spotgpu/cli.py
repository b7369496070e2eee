"""The ``spotgpu`` command: a thin dispatcher over per-area subcommand modules.

Each area owns a module with ``register(subparsers)`` that adds its commands and
sets ``func(args) -> int``. Areas whose optional dependencies are not installed
(the Pulumi extra on a GPU VM, say) still show up, with the install hint, so a
user never meets a bare ImportError.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from spotgpu import __version__

#: (module, commands it registers, extra that brings its dependencies)
SUBCOMMAND_MODULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("spotgpu_pulumi.offline.cli", ("preview",), "pulumi"),
    ("spotgpu.checkpoint.cli", ("ckpt",), ""),
    ("spotgpu.agent.cli", ("agent",), ""),
    ("spotgpu.economics.cli", ("cost", "simulate"), ""),
    ("spotgpu.controller.cli", ("controller",), ""),
    ("spotgpu.drills.cli", ("drill",), "aws,gcp,azure"),
)


def _missing(commands: tuple[str, ...], extra: str, error: ImportError) -> object:
    def run(_args: argparse.Namespace) -> int:
        hint = f"pip install 'spotgpu[{extra}]'" if extra else "reinstall spotgpu"
        print(f"spotgpu {commands[0]}: needs a package that is not installed ({error.name}); fix: {hint}", file=sys.stderr)
        return 2

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spotgpu", description="Run GPU work on spot capacity safely.")
    parser.add_argument("--version", action="version", version=f"spotgpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name, commands, extra in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name and (module_name == err.name or module_name.startswith(err.name + ".")):
                continue  # the area is not part of this install
            for command in commands:
                p = sub.add_parser(command, help=f"(needs the {extra or 'core'} extra)", add_help=True)
                p.set_defaults(func=_missing(commands, extra, err), accepts_extra_args=True)
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "accepts_extra_args", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
