"""``spotgpu ckpt list|verify|gc URL``: inspect and maintain a checkpoint store.

``verify`` exits 1 when any checked generation fails, so it can gate a restore or a
CI job. Cloud stores take the usual obstore environment variables for credentials and
endpoints (``AWS_*``, ``GOOGLE_*``, ``AZURE_STORAGE_*``).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from spotgpu.checkpoint.manager import CheckpointManager


def register(subparsers: Any) -> None:
    ckpt = subparsers.add_parser("ckpt", help="list, verify and garbage-collect checkpoint generations")
    sub = ckpt.add_subparsers(dest="ckpt_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="committed generations and uncommitted debris, newest first")
    p.add_argument("url", help="checkpoint store URL (file://, s3://, gs://, az://)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("verify", help="read and hash every object; exit 1 if any check fails")
    p.add_argument("url")
    p.add_argument("generation", nargs="?", help="generation name or step (default: every committed one)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("gc", help="apply retention and delete old uncommitted debris")
    p.add_argument("url")
    p.add_argument("--keep", type=int, default=5, help="committed generations to keep (default 5)")
    p.add_argument("--grace-seconds", type=float, default=3600, help="age before debris is deleted (default 3600)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_gc)


def _manager(args: argparse.Namespace, **kwargs: Any) -> CheckpointManager:
    return CheckpointManager(args.url, session="cli", **kwargs)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return str(n)


def cmd_list(args: argparse.Namespace) -> int:
    infos = _manager(args).list()
    if args.json:
        print(json.dumps([asdict(i) for i in infos], indent=2))
        return 0
    rows = [
        [
            str(i.step),
            i.generation,
            "committed" if i.committed else "uncommitted",
            _size(i.total_bytes),
            str(i.world_size or "-"),
            i.committed_at or "-",
        ]
        for i in infos
    ]
    print(_table(["STEP", "GENERATION", "STATE", "SIZE", "RANKS", "COMMITTED AT"], rows))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    mgr = _manager(args)
    targets: list[str | int] = [args.generation] if args.generation else [i.step for i in mgr.list() if i.committed]
    reports = [mgr.verify(t) for t in targets]
    if args.json:
        print(json.dumps([asdict(r) for r in reports], indent=2))
    else:
        rows = [
            [
                r.generation,
                "OK" if r.ok else "FAILED",
                str(r.objects_checked),
                _size(r.bytes_checked),
                f"{r.seconds:.2f}s",
                "; ".join(r.problems) or "-",
            ]
            for r in reports
        ]
        print(_table(["GENERATION", "RESULT", "OBJECTS", "BYTES", "TIME", "PROBLEMS"], rows))
    if not reports:
        print("no committed generations to verify")
        return 1
    return 0 if all(r.ok for r in reports) else 1


def cmd_gc(args: argparse.Namespace) -> int:
    report = _manager(args, keep=args.keep, grace_seconds=args.grace_seconds).gc()
    if args.json:
        print(json.dumps(asdict(report), indent=2))
        return 0
    rows = [[g, "kept"] for g in report.kept]
    rows += [[g, "retired"] for g in report.retired]
    rows += [[g, "debris deleted"] for g in report.deleted_debris]
    rows += [[g, "debris kept (younger than grace)"] for g in report.young_debris]
    print(_table(["GENERATION", "ACTION"], rows))
    print(f"newest verified: {report.newest_verified or 'none'}; objects deleted: {report.deleted_objects}")
    return 0
