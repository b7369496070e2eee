"""The platform team's stack program: config -> validated models -> components.

Run by ``pulumi up -s dev|prod`` (Pulumi.yaml: ``main: stacks/``) and, unchanged,
by ``spotgpu preview --stack dev`` under Pulumi's mock runtime.
"""

import pulumi

from components.platform import deploy, load_config

pools = deploy(load_config())  # the spotgpu: namespace, whatever the project is called
for name, pool in pools.items():
    pulumi.export(name, pool.exports)
