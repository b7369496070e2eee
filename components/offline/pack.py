"""Where the spotgpu policy pack is: the checkout's ``policies/``, or the installed wheel's copy.

The wheel installs the pack whole under ``<prefix>/share/spotgpu/policy-pack``
(pyproject ``data-files``), so ``spotgpu preview --program DIR`` judges a
team's project with the same pack after ``pip install 'spotgpu[pulumi]'``.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

PACK_SUBDIR = Path("share") / "spotgpu" / "policy-pack"
_CHECKOUT_PACK = Path(__file__).resolve().parents[2] / "policies"


def installed_pack_dirs() -> list[Path]:
    """Candidate install locations: this environment's data dir, then the user scheme's."""
    roots = [sysconfig.get_path("data")]
    for scheme in ("posix_user", "nt_user", "osx_framework_user"):
        if scheme in sysconfig.get_scheme_names():
            roots.append(sysconfig.get_path("data", scheme))
    return [Path(root) / PACK_SUBDIR for root in roots]


def default_policy_pack() -> Path:
    """The checkout's pack when running from a checkout, else the installed one (first that exists)."""
    for candidate in (_CHECKOUT_PACK, *installed_pack_dirs()):
        if (candidate / "PulumiPolicy.yaml").exists():
            return candidate
    return _CHECKOUT_PACK  # cli.py reports the missing PulumiPolicy.yaml with the fix
