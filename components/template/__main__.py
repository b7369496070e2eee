"""The platform team's stack program: config -> validated models -> components.

Run by ``pulumi up`` (the repository's Pulumi.yaml has ``main: stacks/``; a
project made from the template runs its copy of this file) and, unchanged, by
``spotgpu preview`` under Pulumi's mock runtime.
"""

import pulumi

from spotgpu_pulumi.platform import deploy, load_config

pools = deploy(load_config())  # the spotgpu: namespace, whatever the project is called
for name, pool in pools.items():
    pulumi.export(name, pool.exports)
