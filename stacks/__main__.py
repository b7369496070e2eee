"""The platform team's stack program: config -> validated models -> components.

Run by ``pulumi up -s dev|prod`` (Pulumi.yaml: ``main: stacks/``) and, unchanged,
by ``spotgpu preview --stack dev`` under Pulumi's mock runtime.
"""

import pulumi

from components.platform import deploy
from spotgpu.config import STACK_KEYS, ConfigError, parse_stack_config

_cfg = pulumi.Config()
try:
    config = parse_stack_config({key: _cfg.get(key) for key in STACK_KEYS}, namespace=_cfg.name)
except ConfigError as err:
    # RunError: the CLI shows the one-line message without a Python traceback.
    raise pulumi.RunError(str(err)) from None

pools = deploy(config)
for name, pool in pools.items():
    pulumi.export(name, pool.exports)
