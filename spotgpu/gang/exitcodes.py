"""The exit codes a gang job and its launcher agree on (one place; import them).

The bootstrap's systemd unit and ``torchrun`` restart the job on a clean gang stop and on a
lost peer; any other non-zero code is a real failure, retried a bounded number of times.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn

#: Every rank stopped at the same step after a notice or drain (final checkpoint attempted): restart.
EXIT_GANG_STOP = 75
#: A peer vanished (crash, SIGKILL, 0 s notice) or stalled past the collective timeout: restart.
EXIT_PEER_LOST = 76

RESTARTABLE = frozenset({EXIT_GANG_STOP, EXIT_PEER_LOST})


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr, then end the process with ``code`` at once (``os._exit``).

    A gang job ends this way, never through the interpreter's teardown: freeing a DDP model
    drops its gloo process group, whose destructor joins the group's worker threads while
    holding the GIL, and a worker still freeing its last collective's tensors waits for that
    GIL, so the rank hangs for good (pytorch/pytorch#56297; seen here on torch 2.13 at the end
    of 4-rank runs). After a gloo timeout the teardown aborts instead (SIGABRT). The job's own
    files must be closed (or flushed) before; the checkpoint library has committed by then.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or gone: nothing left to lose
            stream.flush()
    os._exit(code)
