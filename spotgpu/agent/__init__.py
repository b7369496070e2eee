"""The spotgpu node agent: turns a cloud's interruption notice into stop-new-work,
a best-effort final checkpoint, a drain and an acknowledgement.

Design after aws-node-termination-handler: one metadata client per cloud with an
injectable base URL, one monitor per notice source, one normalized
:class:`InterruptionEvent` on a queue, one responder. The workload side is
:class:`spotgpu.agent.client.AgentClient`. Never imports pulumi.
"""

from spotgpu.agent.client import AgentClient, Notice
from spotgpu.agent.events import InterruptionEvent
from spotgpu.contract.interruptions import InterruptionKind

__all__ = ["AgentClient", "InterruptionEvent", "InterruptionKind", "Notice"]
