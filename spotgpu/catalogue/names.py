"""How the names a pool is known by are written: one pattern and one fix each.

A pool's own name, an AWS region and zone, a Google Cloud project and region. The stack's
models (``spotgpu.models.pools``), the controller's config (``spotgpu.controller.config``) and
the command line (``spotgpu.cliutil.POOL``) check them with these, so a name one part accepts
no other refuses, and a refusal reads the same everywhere. Patterns are unanchored: a
pydantic field uses :func:`whole`, a parser ``re.fullmatch``. Pure data, no imports: the CLI
reads it without loading the models.
"""

from __future__ import annotations

import re

#: A pool's stable key: child resource names, tags and telemetry derive from it.
POOL_NAME = r"[a-z][a-z0-9-]{1,18}[a-z0-9]"
POOL_NAME_FIX = "use 3 to 20 lowercase letters, digits or '-', starting with a letter, e.g. train-aws"

AWS_REGION = r"[a-z]{2}(-gov)?-[a-z]+-\d"
AWS_REGION_FIX = "use a region like us-west-2"
AWS_ZONE = AWS_REGION + "[a-z]"
AWS_ZONE_FIX = "use a zone like us-east-1a"

GCP_PROJECT = r"[a-z][a-z0-9-]{4,28}[a-z0-9]"
GCP_PROJECT_FIX = "use a project id like ml-prod-123"
GCP_REGION = r"[a-z]+-[a-z]+\d"
GCP_REGION_FIX = "use a region like us-central1"


_ZONE = re.compile(f"^(?P<aws>{AWS_REGION})[a-z]$|^(?P<gcp>{GCP_REGION})-[a-z]$")


def region_of(zone: str) -> str:
    """The region of an AWS or GCP zone (``us-east-1a`` -> ``us-east-1``, ``us-central1-a`` ->
    ``us-central1``); ``""`` for anything else (Azure's zones ``1``-``3`` name no region)."""
    match = _ZONE.match(zone)
    return (match.group("aws") or match.group("gcp")) if match else ""


def whole(pattern: str) -> str:
    """``pattern`` anchored at both ends, as a pydantic ``Field(pattern=...)`` needs it."""
    return f"^{pattern}$"
