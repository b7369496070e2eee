"""Collect every error line the config-error tests see, at two commits, and list the lines that changed.

A refactor of how errors are raised must leave what the user reads as it was, or make it better on
purpose. This runs the tests that provoke config, model and planner errors (``DEFAULT_TESTS``) at two
revisions, each in its own export of the tree (``git archive``) with this Python, and records what each
test saw: the text of every exception a ``pytest.raises`` caught, and every standard-error line with a
``fix:`` that a test read back (``capsys``/``capfd``, or a subprocess it ran). Then it prints, test by
test, the lines that are only before or only after::

    .venv/bin/python tools/error_lines.py main            # main against the work tree
    .venv/bin/python tools/error_lines.py 32f15b5 HEAD --json changes.json

Exit 0 when nothing changed, 1 when a line changed (read them: each must be as good or better),
2 when the tests themselves failed at either revision. A test that exists on one side only is listed
apart. Used as a pytest plugin (``-p error_lines``), this module records the lines into the file
that ``SPOTGPU_ERROR_LINES`` names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORKTREE = "."
OUT_ENV = "SPOTGPU_ERROR_LINES"
#: The tests that provoke config, model and planner errors and check the line the user reads.
DEFAULT_TESTS = (
    "tests/foundation/test_config_errors.py",
    "tests/foundation/test_config_mutations.py",
    "tests/foundation/test_preview_exit_codes.py",
    "tests/foundation/test_url_fields.py",
    "tests/foundation/test_models.py",
    "tests/foundation/test_gpu_fit.py",
    "tests/aws/test_aws_plan.py",
    "tests/aws/test_aws_rendezvous.py",
    "tests/aws/test_aws_gpu_fit.py",
    "tests/aws/test_aws_pool_wire.py",
    "tests/aws/test_aws_controller_job.py",
    "tests/gcp/test_gcp_plan.py",
    "tests/gcp/test_gcp_rendezvous.py",
    "tests/gcp/test_gcp_gpu_fit.py",
    "tests/gcp/test_gcp_pool_wire.py",
    "tests/azure/test_azure_plan.py",
    "tests/azure/test_azure_rendezvous.py",
    "tests/azure/test_azure_gpu_fit.py",
    "tests/azure/test_azure_naming.py",
    "tests/azure/test_azure_pool_wire.py",
    "tests/clouds",
    "tests/package/test_package_inputs.py",
    "tests/package/test_package_provider.py",
    "tests/controller/test_controller_config.py",
)

# --- the pytest plugin side --------------------------------------------------------------------

_current: list[str] = [""]
#: Temporary directories differ from run to run: named alike on both sides.
_PYTEST_TMP = re.compile(r"/[^\s'\"]*/pytest-of-[^/]+/pytest-\d+/")


def _record(kind: str, text: str) -> None:
    path = os.environ.get(OUT_ENV)
    if not path or not text.strip():
        return
    shown = _PYTEST_TMP.sub("<tmp>/", text.strip()).replace(os.environ.get("SPOTGPU_ERROR_LINES_TREE", "\0"), "<tree>")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"test": _current[0], "kind": kind, "text": shown}) + "\n")


def _fix_lines(text: str | bytes | None) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return [line.strip() for line in (text or "").splitlines() if "fix:" in line or "fix " in line]


def pytest_configure(config: Any) -> None:
    """Wrap what a test reads an error through: ``pytest.raises``, captured stderr, subprocess output."""
    import _pytest.capture
    import _pytest.raises

    raises_exit = _pytest.raises.RaisesExc.__exit__

    def exit_(self: Any, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        handled = raises_exit(self, exc_type, exc_val, exc_tb)
        if handled and exc_val is not None:
            _record(f"raises {type(exc_val).__name__}", str(exc_val))
        return handled

    _pytest.raises.RaisesExc.__exit__ = exit_  # type: ignore[method-assign]

    readouterr = _pytest.capture.CaptureFixture.readouterr

    def read(self: Any) -> Any:
        result = readouterr(self)
        for line in _fix_lines(result.err) + _fix_lines(result.out):
            _record("stderr", line)
        return result

    _pytest.capture.CaptureFixture.readouterr = read  # type: ignore[method-assign]

    run = subprocess.run

    def run_(*args: Any, **kwargs: Any) -> Any:
        done = run(*args, **kwargs)
        if getattr(done, "returncode", 0) not in (0, None):
            for line in _fix_lines(getattr(done, "stderr", None)):
                _record("subprocess", line)
        return done

    subprocess.run = run_  # type: ignore[assignment]


def pytest_runtest_setup(item: Any) -> None:
    _current[0] = os.environ.get("SPOTGPU_ERROR_LINES_PARENT", "") + item.nodeid


# --- the comparing side ------------------------------------------------------------------------


def export_tree(revision: str, into: Path) -> Path:
    target = into / f"tree-{len(list(into.glob('tree-*')))}"
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", revision], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"error_lines: cannot read {revision!r}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def collect(tree: Path, tests: list[str], out: Path) -> int:
    """Run ``tests`` in ``tree`` with this module as a plugin; the lines land in ``out``."""
    present = [t for t in tests if (tree / t).exists()]
    env = {
        **os.environ,
        OUT_ENV: str(out),
        "SPOTGPU_ERROR_LINES_TREE": str(tree),
        "PYTHONPATH": os.pathsep.join([str(tree), str(Path(__file__).resolve().parent)]),
        "PYTEST_PLUGINS": "error_lines",  # the subprocess pytest runs of a test load it too
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *present],
        cwd=tree, env=env, capture_output=True, text=True,
    )
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-2000:], file=sys.stderr)
    return done.returncode


def load(path: Path) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = defaultdict(list)
    if path.exists():
        for row in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(row)
            lines[entry["test"]].append(f"{entry['kind']}: {entry['text']}")
    return lines


def changes(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, Any]:
    """Per test: the lines only before and only after; and the tests that exist on one side only."""
    changed = {}
    for test in sorted(set(before) & set(after)):
        gone = [line for line in before[test] if line not in after[test]]
        new = [line for line in after[test] if line not in before[test]]
        if gone or new:
            changed[test] = {"before": gone, "after": new}
    return {
        "changed": changed,
        "only_before": {t: before[t] for t in sorted(set(before) - set(after))},
        "only_after": {t: after[t] for t in sorted(set(after) - set(before))},
        "same": sum(1 for t in set(before) & set(after) if t not in changed),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=WORKTREE)
    parser.add_argument("--tests", nargs="*", default=list(DEFAULT_TESTS))
    parser.add_argument("--json", type=Path, help="also write the comparison here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="error-lines-") as tmp:
        recorded, codes = [], []
        for side, rev in (("before", args.before), ("after", args.after)):
            tree = REPO if rev == WORKTREE else export_tree(rev, Path(tmp))
            out = Path(tmp) / f"{side}.jsonl"
            codes.append(collect(tree, args.tests, out))
            recorded.append(load(out))
    result = changes(*recorded)
    print(f"{result['same']} tests read the same error lines; {len(result['changed'])} read other lines; "
          f"{len(result['only_before'])} only before, {len(result['only_after'])} only after")
    for test, diff in result["changed"].items():
        print(f"\n{test}")
        for line in diff["before"]:
            print(f"  - {line}")
        for line in diff["after"]:
            print(f"  + {line}")
    for side in ("only_before", "only_after"):
        for test, lines in result[side].items():
            print(f"\n{test} ({side.replace('_', ' ')})")
            for line in lines:
                print(f"  {line}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if any(codes):
        print(f"the tests failed (exit {codes}); the comparison is incomplete", file=sys.stderr)
        return 2
    return 1 if result["changed"] or result["only_before"] or result["only_after"] else 0


if __name__ == "__main__":
    sys.exit(main())
