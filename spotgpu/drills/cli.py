"""``spotgpu drill aws|gcp|azure --pool NAME``: one module per cloud registers its command."""

from __future__ import annotations

import argparse
import importlib

CLOUDS = ("aws", "gcp", "azure")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("drill", help="provoke a spot interruption on one VM of a pool and follow it")
    clouds = p.add_subparsers(dest="cloud", metavar="CLOUD", required=True)
    for cloud in CLOUDS:
        module = importlib.import_module(f"spotgpu.drills.{cloud}")
        module.register(clouds)
