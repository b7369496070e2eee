"""Reusable Pulumi components for spot GPU pools on AWS, Google Cloud and Azure.

Each cloud is one folder: a pure planner ``plan_pool(args: PoolArgs)`` and a
``GpuPool(name, args: PoolArgs, opts)`` (type token ``spotgpu:<cloud>:GpuPool``)
built from thin components over that plan, registered in
:data:`spotgpu_pulumi.clouds.CLOUDS` by the folder's ``cloud.py``. What every
cloud plans the same way is in :mod:`spotgpu_pulumi.planning`.
``spotgpu_pulumi.platform.deploy`` builds every pool of a stack through the registry.
"""

from spotgpu_pulumi.args import PoolArgs

__all__ = ["PoolArgs"]
