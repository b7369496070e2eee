"""Reusable Pulumi components for spot GPU pools on AWS, Google Cloud and Azure.

Each cloud package exports ``GpuPool(name, args: PoolArgs, opts)`` (type token
``spotgpu:<cloud>:GpuPool``), built from thin components over pure planning
functions. ``spotgpu_pulumi.platform.deploy`` builds every pool of a stack.
"""

from spotgpu_pulumi.args import PoolArgs

__all__ = ["PoolArgs"]
