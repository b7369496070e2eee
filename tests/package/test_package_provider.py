"""Runs ``provider_checks.py`` (schema snapshot, construct under mocks) and ``standalone_checks.py``
(the standalone stores and fallback groups) in a fresh interpreter.

``pulumi.provider`` and the Google Cloud client libraries both register
``google.rpc.Status`` in protobuf's default descriptor pool, so they cannot be
imported into one pytest process; the provider host never loads the latter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKS = [HERE / "provider_checks.py", HERE / "standalone_checks.py"]


def test_provider_checks_pass_in_their_own_interpreter() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, CHECKS)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE.parents[1],
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout, run.stdout[-2000:]
