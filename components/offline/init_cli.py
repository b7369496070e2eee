"""``spotgpu init DIR``: start a Pulumi project from the shipped template, offline.

The same project ``pulumi new`` makes from ``spotgpu_pulumi.templates.TEMPLATE_DIR``
(:func:`~spotgpu_pulumi.templates.render_template` is both), without the Pulumi CLI:
``cd DIR && spotgpu preview --stack dev`` previews it straight away. It never writes
into a directory that already holds a Pulumi project: nothing of the team's is lost.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from spotgpu.cliutil import STACK, UserError, add_json_flag, print_json

#: Pulumi's own rule for project names.
_PROJECT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="start a Pulumi project for spot GPU pools from the template, offline",
        description="Write a Pulumi project (Pulumi.yaml, __main__.py, Pulumi.<stack>.yaml, policy config, "
        "requirements) into DIR, as `pulumi new` does from the spotgpu template.",
    )
    p.add_argument("dir", type=Path, metavar="DIR", help="directory to create (must not hold a Pulumi project)")
    p.add_argument("--owner", required=True, help="owning team; tags every resource (spotgpu:owner)")
    p.add_argument("--clouds", default="aws,gcp,azure", help="clouds to create pools on (default aws,gcp,azure)")
    p.add_argument("--name", default=None, help="Pulumi project name (default: DIR's name)")
    p.add_argument("--stack", default="dev", type=STACK, help="first stack; writes Pulumi.<stack>.yaml (default dev)")
    p.add_argument("--environment", default=None, help="spotgpu:environment (default: the stack name)")
    p.add_argument("--description", default="Spot GPU pools (spotgpu)", help="project description")
    p.add_argument(
        "--wheel",
        type=Path,
        default=None,
        help="a local spotgpu wheel for requirements.txt (default: the spotgpu[pulumi] pin, from your index)",
    )
    add_json_flag(p, "the files written")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spotgpu.cliutil import camel_keys
    from spotgpu.config import select_clouds
    from spotgpu_pulumi.templates import render_template

    dest: Path = args.dir.resolve()
    name = args.name or dest.name
    if not _PROJECT_NAME.match(name):
        raise UserError(f"--name {name!r}: not a Pulumi project name; fix: use letters, digits, '_', '.' or '-'")
    if (dest / "Pulumi.yaml").exists() or (dest / "Pulumi.yml").exists():
        raise UserError(f"{dest}: already holds a Pulumi project; fix: choose a new DIR (nothing was written)")
    select_clouds(args.clouds, field="--clouds")  # one line naming the flag and the bad cloud, exit 2
    requirement = None
    if args.wheel is not None:
        wheel = args.wheel.resolve()
        if wheel.suffix != ".whl" or not wheel.is_file():
            raise UserError(f"--wheel {wheel}: no such wheel file; fix: pass the spotgpu-*.whl you built (pip wheel .)")
        requirement = f"spotgpu[pulumi] @ {wheel.as_uri()}"
    render_template(
        dest,
        project=name,
        description=args.description,
        stack=args.stack,
        answers={
            "spotgpu:owner": args.owner,
            "spotgpu:clouds": args.clouds,
            "spotgpu:environment": args.environment or args.stack,
        },
        requirement=requirement,
    )
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    if args.json:
        print_json(camel_keys({"project": name, "directory": str(dest), "stack": args.stack, "files": files}))
        return 0
    print(f"created project {name} in {dest}: {', '.join(files)}")
    print(f"next: cd {dest} && spotgpu preview --stack {args.stack}   (offline; replace the placeholder ids before pulumi up)")
    sys.stdout.flush()
    return 0
