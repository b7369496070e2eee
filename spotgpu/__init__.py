"""spotgpu: run GPU work on spot capacity safely.

This package is the runtime that installs on every GPU VM (node agent, checkpoint
library, telemetry), plus the cost model and the fallback controller. It never
imports Pulumi: the Pulumi side lives in ``components/`` and ``stacks/``.
"""

__version__ = "0.1.0"
