"""The ``pulumi new`` template shipped with the package, and an offline renderer for it.

``TEMPLATE_DIR`` is a Pulumi template (a ``Pulumi.yaml`` with a ``template:``
section, the same ``__main__.py`` as the repository's ``stacks/``, pinned
requirements, the policy config). :func:`render_template` lays it down as
``pulumi new`` does — copy every file, replace ``${PROJECT}`` and
``${DESCRIPTION}``, write ``Pulumi.<stack>.yaml`` with each prompt's answer or
default — so a test (and a team without the CLI at hand) can preview the result.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import yaml

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"


def template_prompts(template_dir: Path = TEMPLATE_DIR) -> dict[str, dict[str, str]]:
    """``{config key: {description, default?}}`` from the template's ``Pulumi.yaml``."""
    doc = yaml.safe_load((template_dir / "Pulumi.yaml").read_text())
    return dict(doc["template"]["config"])


def render_template(
    dest: Path,
    *,
    project: str,
    description: str,
    stack: str,
    answers: Mapping[str, str],
    template_dir: Path = TEMPLATE_DIR,
) -> Path:
    """Create the project in ``dest`` as ``pulumi new --stack <stack> -c key=value ...`` would."""
    prompts = template_prompts(template_dir)
    unknown = sorted(set(answers) - set(prompts))
    if unknown:
        raise ValueError(f"{unknown} are not prompts of the template; use {sorted(prompts)}")
    dest.mkdir(parents=True, exist_ok=True)
    for source in sorted(template_dir.rglob("*")):
        if source.is_dir() or "__pycache__" in source.parts:
            continue
        target = dest / source.relative_to(template_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text().replace("${PROJECT}", project).replace("${DESCRIPTION}", description)
        target.write_text(text)
        shutil.copymode(source, target)
    config: dict[str, str] = {}
    for key, prompt in prompts.items():
        value = answers.get(key, prompt.get("default"))
        if value is None:
            raise ValueError(f"prompt {key} has no default; answer it ({prompt.get('description', '')})")
        config[key] = str(value)
    (dest / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return dest
