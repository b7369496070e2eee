"""The ``pulumi new`` template shipped with the package, and an offline renderer for it.

``TEMPLATE_DIR`` is a Pulumi template (a ``Pulumi.yaml`` with a ``template:``
section and the starter workloads, ladders and pools as structured project-level
config, the same ``__main__.py`` as the repository's ``stacks/``, pinned
requirements, the policy config). :func:`render_template` lays it down as
``pulumi new`` does — copy every file, replace ``${PROJECT}`` and
``${DESCRIPTION}``, drop the ``template:`` block, write ``Pulumi.<stack>.yaml``
with each prompt's answer or default — which is what ``spotgpu init`` runs, so a
team without the Pulumi CLI at hand can start a project and preview it.
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


#: The rendered ``Pulumi.yaml``'s opening comment (the template's own describes the template).
PROJECT_HEADER = """\
# A spotgpu project: spot GPU pools with durable checkpoints, on-demand fallback and the
# spotgpu policy pack, made from the spotgpu template (spotgpu_pulumi.templates.TEMPLATE_DIR).
#   spotgpu preview --stack STACK                 offline, from this directory
#   pulumi up -s STACK --policy-pack <pack> --policy-pack-config policy-config.json
# The workloads, ladders and pools under config: are project-level config every stack
# gets; a stack overrides a key in its Pulumi.<stack>.yaml. Replace the placeholder subnet,
# image, network and key ids with your landing zone's before `pulumi up`.
"""


def render_project_file(text: str) -> str:
    """The template's ``Pulumi.yaml`` as a project's: project header, no ``template:`` block.

    ``pulumi new`` drops the ``template:`` section too; the text is edited, not re-dumped,
    so the structured config keeps its layout.
    """
    lines = text.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("name:"))
    kept: list[str] = []
    in_template = False
    for line in lines[first:]:
        top_level = bool(line.strip()) and not line[0].isspace()
        if top_level:
            in_template = line.startswith("template:")
        if not in_template:
            kept.append(line)
    return PROJECT_HEADER + "".join(kept)


def render_template(
    dest: Path,
    *,
    project: str,
    description: str,
    stack: str,
    answers: Mapping[str, str],
    template_dir: Path = TEMPLATE_DIR,
    requirement: str | None = None,
) -> Path:
    """Create the project in ``dest`` as ``pulumi new --stack <stack> -c key=value ...`` would.

    ``requirement`` replaces ``requirements.txt``'s spotgpu line (a local wheel's
    ``spotgpu[pulumi] @ file:///...``); the default pin resolves from the index pip is given.
    """
    prompts = template_prompts(template_dir)
    unknown = sorted(set(answers) - set(prompts))
    if unknown:
        raise ValueError(f"{unknown} are not prompts of the template; use {sorted(prompts)}")
    config: dict[str, str] = {}
    for key, prompt in prompts.items():
        value = answers.get(key, prompt.get("default"))
        if value is None:
            raise ValueError(f"prompt {key} has no default; answer it ({prompt.get('description', '')})")
        config[key] = str(value)
    dest.mkdir(parents=True, exist_ok=True)
    for source in sorted(template_dir.rglob("*")):
        if source.is_dir() or "__pycache__" in source.parts:
            continue
        target = dest / source.relative_to(template_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text().replace("${PROJECT}", project).replace("${DESCRIPTION}", description)
        if source.name == "Pulumi.yaml":
            text = render_project_file(text)
        elif source.name == "requirements.txt" and requirement is not None:
            text = "".join(requirement + "\n" if line.startswith("spotgpu") else line for line in text.splitlines(keepends=True))
        target.write_text(text)
        shutil.copymode(source, target)
    (dest / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return dest
