"""Where a pool VM's parts find the agent's config: the bootstrap writes it, the agent runs on it, and the
checkpoint library and the framework callbacks read the workload's figures from it (the local tier, the
checkpoint interval). Written here once; a test or a container points them elsewhere with the variable."""

from __future__ import annotations

#: Where the bootstrap writes the agent config.
AGENT_CONFIG_PATH = "/etc/spotgpu/agent.json"
#: The variable that overrides it (tests, containers, ``spotgpu drill local``).
AGENT_CONFIG_ENV = "SPOTGPU_AGENT_CONFIG"

__all__ = ["AGENT_CONFIG_ENV", "AGENT_CONFIG_PATH"]
