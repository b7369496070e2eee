from pulumi_policy import EnforcementLevel, PolicyPack
from spotgpu_guard import DESCRIPTION, PACK_NAME, POLICIES

PolicyPack(
    name=PACK_NAME,
    description=DESCRIPTION,
    enforcement_level=EnforcementLevel.ADVISORY,
    policies=POLICIES,
)
