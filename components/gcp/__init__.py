"""Google Cloud side of spotgpu: ``GpuPool`` (``spotgpu:gcp:GpuPool``) and its thin children.

Planning lives in :mod:`components.gcp.plan` and :mod:`components.gcp.naming`
(pure, tested directly); the component modules only turn decisions into resources.
"""

from components.gcp.pool import GpuPool

__all__ = ["GpuPool"]
