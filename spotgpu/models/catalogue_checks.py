"""Catalogue checks the pool models run: unknown names get the closest matches.

Each check raises :class:`~spotgpu.models.base.FieldProblem` pointed at the key
the user wrote, so the error line reads ``spotgpu:pools[p].instanceTypes[1]: ...``.
``stated`` is the pool's ``optOut.catalogue`` reason: with one, names the
catalogue does not know yet pass (a provider launched them after the catalogue
was made); names it knows to be wrong (a non-GPU type) still fail.
"""

from __future__ import annotations

import re

from spotgpu import catalogue
from spotgpu.models.base import FieldProblem

_STATE_IT = "or set optOut.catalogue to a stated reason if the catalogue is out of date"
_AZURE_FAMILY = re.compile(r"^Standard_([A-Z]+)\d")


def _suggest(word: str, known: list[str] | tuple[str, ...] | set[str], what: str) -> str:
    near = catalogue.closest(word, known)
    return f"use a known {what}" + (f" (closest: {', '.join(near)})" if near else "")


def aws_instance_types(types: tuple[str, ...], stated: str | None) -> None:
    known, gpus = catalogue.aws_instance_types(), catalogue.aws_gpu_types()
    for i, name in enumerate(types):
        if name in known:
            if catalogue.aws_gpu(name) is None:
                raise FieldProblem(
                    "is not a GPU instance type (the EC2 catalogue lists no GPU for it)",
                    at=f"instanceTypes[{i}]", value=name,
                    fix=f"use a GPU type such as {', '.join(catalogue.closest(name, gpus) or ['g5.2xlarge', 'g6.2xlarge'])}",
                )
        elif not stated:
            raise FieldProblem("is not an EC2 instance type", at=f"instanceTypes[{i}]", value=name,
                               fix=f"{_suggest(name, gpus, 'GPU instance type')}, {_STATE_IT}")


def aws_region_of_zones(zones: tuple[str, ...], stated: str | None) -> str | None:
    """The one region the subnets' zones belong to; raises when they span regions or a zone is unknown."""
    regions = catalogue.aws_regions()
    found = sorted({z[:-1] for z in zones})
    if len(found) > 1:
        raise FieldProblem(f"subnets are in {len(found)} regions {found}; a pool lives in one region",
                           at="subnets", value=list(zones), fix="list subnets of one region only")
    if not found:
        return None
    region = found[0]
    if region not in regions:
        if stated:
            return region
        raise FieldProblem(f"subnet zones are in region {region}, which AWS does not have", at="subnets",
                           value=list(zones), fix=f"{_suggest(region, list(regions), 'region')}, {_STATE_IT}")
    for i, zone in enumerate(zones):
        if zone not in regions[region] and not stated:
            raise FieldProblem(f"is not an availability zone of {region}", at=f"subnets[{i}].zone", value=zone,
                               fix=f"use one of {', '.join(regions[region])}, {_STATE_IT}")
    return region


def aws_types_in_region(types: tuple[str, ...], region: str, stated: str | None) -> None:
    if stated or region not in catalogue.aws_regions():
        return
    for i, name in enumerate(types):
        shape = catalogue.aws_gpu(name)
        if shape is not None and shape.regions is not None and region not in shape.regions:
            where = ", ".join(shape.regions[:6]) + (" ..." if len(shape.regions) > 6 else "")
            raise FieldProblem(
                f"is not offered in {region} (AWS DescribeInstanceTypeOfferings)", at=f"instanceTypes[{i}]",
                value=name, fix=f"use a type {region} offers, or a region that offers {name} ({where}), {_STATE_IT}",
            )


def gcp_region(region: str, stated: str | None) -> None:
    if region not in catalogue.gcp_regions() and not stated:
        raise FieldProblem("is not a Google Cloud region", at="region", value=region,
                           fix=f"{_suggest(region, catalogue.gcp_regions(), 'region')}, {_STATE_IT}")


def gcp_machine(i: int, machine_type: str, accelerator: tuple[str, int] | None, stated: str | None) -> None:
    at = f"machineTypes[{i}]"
    built_in = catalogue.gcp_machine(machine_type)
    accelerators = catalogue.gcp_accelerators()
    if built_in is not None:
        if accelerator is not None:
            raise FieldProblem(f"carries its GPUs ({built_in.describe()}); guest accelerators attach only to N1",
                               at=f"{at}.accelerator", value=accelerator[0], fix="remove accelerator")
        return
    if not catalogue.gcp_is_n1(machine_type) and not stated:
        raise FieldProblem("is not a GPU machine type (A2, A3, A4, G2, or N1 with an accelerator)",
                           at=f"{at}.machineType", value=machine_type,
                           fix=f"{_suggest(machine_type, catalogue.gcp_machine_types(), 'machine type')}, {_STATE_IT}")
    if accelerator is None:
        return
    name, count = accelerator
    info = accelerators.get(name)
    if info is None:
        if stated:
            return
        attachable = [k for k, v in accelerators.items() if v.get("attach") == "n1"]
        raise FieldProblem("is not a Google Cloud accelerator type", at=f"{at}.accelerator.type", value=name,
                           fix=f"{_suggest(name, list(accelerators), 'accelerator')}; N1 takes {', '.join(attachable)}")
    if info.get("attach") != "n1":
        raise FieldProblem(f"is built into its own machine family ({info['attach']}), not attachable to N1",
                           at=f"{at}.accelerator.type", value=name,
                           fix=f"use the {info['attach']} machine type without accelerator, or an N1 accelerator")
    if count not in info.get("counts", [count]):
        raise FieldProblem(f"{name} attaches in counts of {info['counts']}", at=f"{at}.accelerator.count",
                           value=count, fix=f"use one of {info['counts']}")


def azure_location(location: str, stated: str | None) -> None:
    if location not in catalogue.azure_locations() and not stated:
        raise FieldProblem("is not an Azure location", at="location", value=location,
                           fix=f"{_suggest(location, catalogue.azure_locations(), 'location')}, {_STATE_IT}")


def azure_sizes(sizes: tuple[str, ...], key: str, stated: str | None) -> None:
    known = catalogue.azure_sizes()
    for i, name in enumerate(sizes):
        if catalogue.azure_size(name) is not None:
            continue
        m = _AZURE_FAMILY.match(name)
        at = f"{key}[{i}]" if len(sizes) > 1 or key == "vmSizes" else key
        if m and not m.group(1).startswith("N"):
            raise FieldProblem(f"is a {m.group(1)}-series size without GPUs", at=at, value=name,
                               fix=f"use an N-series GPU size such as {', '.join(catalogue.closest(name, known) or ['Standard_NC24ads_A100_v4'])}")
        if not stated:
            raise FieldProblem("is not an Azure GPU VM size the catalogue knows", at=at, value=name,
                               fix=f"{_suggest(name, known, 'GPU size')}, {_STATE_IT}")
