"""``spotgpu drill aws|gcp|azure --pool NAME`` (one module per cloud) and ``spotgpu drill local`` (a gang on this machine).

Each cloud's drill needs its SDK (an extra). On a VM without it the command still
appears and says which extra to install, and the rest of the CLI keeps working.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from spotgpu.catalogue import CLOUDS


def _needs_extra(cloud: str, missing: str | None) -> object:
    def run(_args: argparse.Namespace) -> int:
        print(
            f"spotgpu drill {cloud}: needs {missing or 'a cloud SDK'}, which is not installed; "
            f"fix: pip install 'spotgpu[{cloud}]'",
            file=sys.stderr,
        )
        return 2

    return run


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("drill", help="provoke a spot interruption on one VM of a pool and follow it")
    clouds = p.add_subparsers(dest="cloud", metavar="CLOUD", required=True)
    for cloud in CLOUDS:
        name = f"spotgpu.drills.{cloud}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:
                continue
            stub = clouds.add_parser(cloud, help=f"(needs the {cloud} extra)")
            stub.set_defaults(func=_needs_extra(cloud, err.name), accepts_extra_args=True)
            continue
        module.register(clouds)
    from spotgpu.drills import local  # no cloud SDK: fakes, agents and torchrun on this machine

    local.register(clouds)
