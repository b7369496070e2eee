"""A Pulumi program of raw cloud resources (no spotgpu components), judged by the same pack.

``spotgpu preview --program tests/policies/programs/raw --stack good`` passes;
``--stack bad`` is rejected. ``raw:pools`` lists pools as ``{cloud, knobs...}``.
"""

import pulumi
from raw_resources import build

build(pulumi.Config("raw").require_object("pools"))
