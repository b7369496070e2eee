"""Gang-safe interruptions for multi-node jobs: one stop, one step, one final checkpoint.

``Gang(AgentClient())`` in every rank's loop; see docs/agent.md "Multi-node jobs".
Imports torch only when a :class:`Gang` is created.
"""

from spotgpu.gang.exitcodes import EXIT_GANG_STOP, EXIT_PEER_LOST, RESTARTABLE, exit_now
from spotgpu.gang.gang import Gang, GangRestoreError, GangStop, PeerLost, is_peer_error
from spotgpu.gang.timing import choose_every, collective_timeout

__all__ = [
    "EXIT_GANG_STOP",
    "EXIT_PEER_LOST",
    "RESTARTABLE",
    "Gang",
    "GangRestoreError",
    "GangStop",
    "PeerLost",
    "choose_every",
    "collective_timeout",
    "exit_now",
    "is_peer_error",
]
