"""Compare ``spotgpu preview --stack S --json`` of two commits byte for byte: proof that a refactor moved nothing.

A change that only moves code must leave every URN, input, output, verdict and economics figure of the
shipped stacks as it was. This checks out each commit's tree (``git archive``, so the repository's
worktrees and index are left alone) into a temporary directory, runs the preview there with this
Python (the same installed packages for both; the tree under test comes first on ``sys.path``), and
compares the two documents byte for byte::

    .venv/bin/python tools/preview_diff.py main            # main against the work tree
    .venv/bin/python tools/preview_diff.py 32f15b5 HEAD     # two commits
    .venv/bin/python tools/preview_diff.py main --stack prod

Prints one line per stack (``same``, with the document's size and SHA-256, or ``DIFFERS`` and a short
unified diff) and exits 0 when every stack is the same, 1 when one differs, 2 when a preview could not
run. The preview's exit code is compared too (a mandatory violation exits 1 on both sides alike).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The argument that names the work tree as it stands (uncommitted edits included) instead of a commit.
WORKTREE = "."
STACKS = ("dev", "prod")


@dataclass(frozen=True)
class Preview:
    """One preview run: its exit code and its standard output, as bytes."""

    code: int
    out: bytes
    err: str


def export_tree(revision: str, into: Path) -> Path:
    """The tree of ``revision`` written under ``into`` (``git archive``: symlinks kept, nothing of .git)."""
    target = into / f"tree-{len(list(into.glob('tree-*')))}"
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", revision], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise SystemExit(f"preview_diff: cannot read {revision!r}: {archive.stderr.decode().strip()}; "
                         "fix: name a commit, branch or tag of this repository")
    tar = target / ".tree.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as fh:
        fh.extractall(target, filter="tar")
    tar.unlink()
    return target


def run_preview(tree: Path, stack: str) -> Preview:
    """``spotgpu preview --stack STACK --json`` in ``tree`` with ``tree`` first on the import path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    probe = subprocess.run(
        [sys.executable, "-c", "import spotgpu, spotgpu_pulumi; print(spotgpu.__file__); print(spotgpu_pulumi.__file__)"],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )
    found = [Path(line).resolve() for line in probe.stdout.split()]
    if probe.returncode != 0 or not found or any(tree.resolve() not in p.parents for p in found):
        raise SystemExit(f"preview_diff: {tree} would not import its own spotgpu ({probe.stdout.strip()} "
                         f"{probe.stderr.strip()}); fix: run this with the project's .venv/bin/python")
    done = subprocess.run(
        [sys.executable, "-m", "spotgpu", "preview", "--stack", stack, "--json"],
        cwd=tree, env=env, capture_output=True, check=False,
    )
    return Preview(done.returncode, done.stdout, done.stderr.decode(errors="replace"))


def compare(stack: str, before: Preview, after: Preview, context: int = 40) -> tuple[bool, str]:
    """(same, the report lines) for one stack's two previews."""
    if before.code not in (0, 1) or after.code not in (0, 1):
        bad = before if before.code not in (0, 1) else after
        return False, f"{stack}: the preview failed (exit {bad.code}): {bad.err.strip().splitlines()[-1:] or ''}"
    if before.code == after.code and before.out == after.out:
        digest = hashlib.sha256(before.out).hexdigest()
        return True, f"{stack}: same ({len(before.out)} bytes, sha256 {digest}, exit {before.code})"
    lines = [f"{stack}: DIFFERS (exit {before.code} -> {after.code}; {len(before.out)} -> {len(after.out)} bytes)"]
    diff = difflib.unified_diff(
        before.out.decode(errors="replace").splitlines(), after.out.decode(errors="replace").splitlines(),
        "before", "after", lineterm="", n=2,
    )
    lines += list(diff)[:context]
    return False, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="a commit, branch or tag")
    parser.add_argument("after", nargs="?", default=WORKTREE,
                        help=f"a commit, branch or tag, or {WORKTREE!r} for the work tree as it stands (default)")
    parser.add_argument("--stack", action="append", choices=STACKS, help="a stack to compare (default: dev and prod)")
    args = parser.parse_args(argv)
    stacks = args.stack or list(STACKS)
    failed = differs = False
    with tempfile.TemporaryDirectory(prefix="preview-diff-") as tmp:
        trees = [REPO if rev == WORKTREE else export_tree(rev, Path(tmp)) for rev in (args.before, args.after)]
        for stack in stacks:
            before, after = (run_preview(tree, stack) for tree in trees)
            same, report = compare(stack, before, after)
            print(report)
            failed |= before.code not in (0, 1) or after.code not in (0, 1)
            differs |= not same
    return 2 if failed else 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
