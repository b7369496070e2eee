"""The exit codes a gang job and its launcher agree on (one place; import them).

The bootstrap's systemd unit and ``torchrun`` restart the job on a clean gang stop and on a
lost peer; any other non-zero code is a real failure, retried a bounded number of times.
"""

from __future__ import annotations

#: Every rank stopped at the same step after a notice or drain (final checkpoint attempted): restart.
EXIT_GANG_STOP = 75
#: A peer vanished (crash, SIGKILL, 0 s notice) or stalled past the collective timeout: restart.
EXIT_PEER_LOST = 76

RESTARTABLE = frozenset({EXIT_GANG_STOP, EXIT_PEER_LOST})
