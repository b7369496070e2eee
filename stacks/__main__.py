"""The platform team's stack program: config -> validated models -> components.

Run by ``pulumi up -s dev|prod`` (Pulumi.yaml: ``main: stacks/``) and, unchanged,
by ``spotgpu preview --stack dev`` under Pulumi's mock runtime.
"""

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env

from components.offline.validate import validate_engine_config
from components.platform import deploy
from spotgpu.config import ConfigError

_cfg = pulumi.Config()
try:
    # Every key of the project namespace is validated (a misspelt key is an error, not
    # ignored), with the provider regions the pools must agree with, and every pool is
    # planned before the first resource is registered.
    config = validate_engine_config({**get_config_env(), **CONFIG.get()}, namespace=_cfg.name)
    pools = deploy(config)
except ConfigError as err:
    # RunError: the CLI shows the one-line message without a Python traceback.
    raise pulumi.RunError(str(err)) from None

for name, pool in pools.items():
    pulumi.export(name, pool.exports)
