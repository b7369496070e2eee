"""``spotgpu ckpt list|verify|gc STORE``: inspect and maintain a checkpoint store.

``STORE`` is a URL (``file://``, ``s3://``, ``gs://``, ``az://``) or a local directory path.
``verify`` exits 1 when any checked generation fails, so it can gate a restore or a CI job;
a bad URL, a missing local directory or a store that refuses the credentials is one line on
stderr and exit 2. Cloud stores take the usual obstore environment variables for credentials
and endpoints (``AWS_*``, ``GOOGLE_*``, ``AZURE_STORAGE_*``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from spotgpu.cliutil import Progress, UserError, add_json_flag, camel_keys, error_line, number, print_json, style, whole

if TYPE_CHECKING:  # the manager pulls in numpy and obstore: imported when a command runs, not for --help
    from spotgpu.checkpoint.manager import CheckpointManager

STORE_HELP = "checkpoint store: a URL (file://, s3://, gs://, az://) or a local directory"


def register(subparsers: Any) -> None:
    ckpt = subparsers.add_parser("ckpt", help="list, verify and garbage-collect checkpoint generations")
    sub = ckpt.add_subparsers(dest="ckpt_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="committed generations and uncommitted debris, newest first")
    p.add_argument("url", metavar="STORE", help=STORE_HELP)
    add_json_flag(p, "the generations")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("verify", help="read and hash every object; exit 1 if any check fails")
    p.add_argument("url", metavar="STORE", help=STORE_HELP)
    p.add_argument("generation", nargs="?", help="generation name or step (default: every committed one)")
    add_json_flag(p, "the verification reports")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("gc", help="apply retention and delete old uncommitted debris")
    p.add_argument("url", metavar="STORE", help=STORE_HELP)
    p.add_argument("--keep", type=whole(1), default=5, help="committed generations to keep (default 5)")
    p.add_argument("--grace-seconds", type=number(0), default=3600, help="age before debris is deleted (default 3600)")
    p.add_argument("--dry-run", action="store_true", help="say what would be deleted; delete nothing")
    add_json_flag(p, "the gc report")
    p.set_defaults(func=cmd_gc)


def store_url(text: str) -> str:
    """A store URL from what the user typed (bare paths become ``file://`` URLs), parsed
    by the library's one parser.

    A local store that does not exist is an error rather than an empty listing: it is
    almost always a typo, and ``gc`` on it would silently do nothing.
    """
    from spotgpu.storage.urls import parse_store_url, redact_url

    try:
        where = parse_store_url(text)
    except ValueError as err:
        raise UserError(str(err)) from None
    if where.path is not None and not where.path.is_dir():
        what = "is not a directory" if where.path.exists() else "does not exist"
        raise UserError(
            f"{redact_url(text)}: {what}; fix: pass the directory the checkpoints were saved to, or an s3://, gs://, az:// URL"
        )
    return text if where.path is None else where.text


@contextmanager
def _store_errors(url: str) -> Iterator[None]:
    """Bad URLs and refused or unreachable stores as one line (exit 2), not a traceback."""
    from obstore.exceptions import BaseError as ObstoreError

    from spotgpu.storage.urls import redact_url

    try:
        yield
    except ValueError as err:  # open_store's "has scheme ''; fix: ..." and kin
        raise UserError(str(err)) from None
    except ObstoreError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(
            f"{redact_url(url)}: {type(err).__name__}: {first}; fix: check the credentials and endpoint "
            "(AWS_*, GOOGLE_*, AZURE_STORAGE_* environment variables) and the bucket name"
        ) from None


def _with_manager(args: argparse.Namespace, work: Callable[[CheckpointManager], Any], **kwargs: Any) -> Any:
    from spotgpu.checkpoint.manager import CheckpointManager

    url = store_url(args.url)
    with _store_errors(url):
        return work(CheckpointManager(url, session="cli", **kwargs))


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
    infos = _with_manager(args, lambda mgr: mgr.list())
    if args.json:
        print_json(camel_keys([asdict(i) for i in infos]))
        return 0
    rows = [
        [
            str(i.step),
            i.generation,
            i.state,
            _size(i.total_bytes),
            str(i.world_size or "-"),
            i.committed_at or "-",
        ]
        for i in infos
    ]
    print(_table(["STEP", "GENERATION", "STATE", "SIZE", "RANKS", "COMMITTED AT"], rows))
    for i in infos:
        if i.failed:
            print(f"step {i.step} failed verification: {i.failed}")
    return 0


def _verify_all(mgr: CheckpointManager, generation: str | None) -> list[Any]:
    listed = mgr.list()
    if generation and not any(generation in (i.generation, str(i.step)) for i in listed):
        steps = ", ".join(str(i.step) for i in listed[:5]) or "none: the store holds no generation"
        raise UserError(f"GENERATION {generation!r}: no such step or generation in {mgr.url}; fix: name one that "
                        f"`spotgpu ckpt list` shows (steps: {steps}), or leave it out to verify every committed one")
    targets: list[str | int] = [generation] if generation else [i.step for i in listed if i.committed]
    reports = []
    with Progress("verifying") as progress:
        for n, target in enumerate(targets, 1):
            progress.update(f"{n}/{len(targets)} (step {target})")
            reports.append(mgr.verify(target))
    return reports


def cmd_verify(args: argparse.Namespace) -> int:
    reports = _with_manager(args, lambda mgr: _verify_all(mgr, args.generation))
    if args.json:
        print_json(camel_keys([asdict(r) for r in reports]))
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
        table = _table(["GENERATION", "RESULT", "OBJECTS", "BYTES", "TIME", "PROBLEMS"], rows).split("\n")
        print("\n".join([table[0]] + [style(line, "green" if r.ok else "red") for line, r in zip(table[1:], reports, strict=True)]))
    if not reports:
        error_line("spotgpu ckpt verify", f"{args.url}: no committed generations to verify")
        return 1
    return 0 if all(r.ok for r in reports) else 1


def cmd_gc(args: argparse.Namespace) -> int:
    report = _with_manager(
        args, lambda mgr: mgr.gc(dry_run=args.dry_run), keep=args.keep, grace_seconds=args.grace_seconds
    )
    if args.json:
        print_json(camel_keys(asdict(report)))
        return 0
    would = "would be " if report.dry_run else ""
    failed = set(report.failed)
    rows = [[g, "kept"] for g in report.kept]
    rows += [[g, f"{would}retired (failed verification)" if g in failed else f"{would}retired"] for g in report.retired]
    rows += [[g, f"debris {would}deleted"] for g in report.deleted_debris]
    rows += [[g, "debris kept (younger than grace)"] for g in report.young_debris]
    rows += [[g, "kept: a save in progress (live writer lease)"] for g in report.live_writers]
    print(_table(["GENERATION", "ACTION"], rows))
    verb = "objects that would be deleted" if report.dry_run else "objects deleted"
    print(f"newest verified: {report.newest_verified or 'none'}; {verb}: {report.deleted_objects}")
    if report.dry_run:
        print("dry run: nothing was deleted")
    return 0
