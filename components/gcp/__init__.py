"""Placeholder GpuPool for gcp until the real component lands (foundation scaffolding)."""

from __future__ import annotations

import pulumi

from components.args import PoolArgs


class GpuPool(pulumi.ComponentResource):
    def __init__(self, name: str, args: PoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spotgpu:gcp:GpuPool", name, None, opts)
        self.exports: dict[str, object] = {"pool": name}
        self.register_outputs(self.exports)
