"""Generate ``spotgpu/catalogue/data/aws.json`` from the AWS data the installed SDKs carry.

Inputs (all pinned in pyproject.toml, nothing fetched):

* botocore's EC2 service model, shape ``InstanceType``: every instance type name
  the EC2 API accepts (the same enum ``pulumi_aws.ec2.InstanceType`` mirrors);
* moto's recorded ``DescribeInstanceTypes`` output (``GpuInfo``: GPU model, count,
  memory per GPU) and ``DescribeInstanceTypeOfferings`` per region and per
  availability zone (which regions and zones offer each type);
* :data:`SUPPLEMENT`: older GPU families the moto recording lacks ``GpuInfo`` for,
  entered by hand from AWS's "Accelerated computing instance specifications" page.

Run by ``python3 tools/lock.py`` (the lock refresh syncs botocore and moto, then regenerates this);
``tests/foundation/test_catalogue.py`` fails while the committed file is stale.
"""

from __future__ import annotations

import gzip
import json
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "spotgpu" / "catalogue" / "data" / "aws.json"

#: name -> (manufacturer, model, GPUs, GiB per GPU, vCPUs, host memory GiB, local NVMe disks, local NVMe GB);
#: from the AWS EC2 documentation pages "Accelerated computing instance specifications"
#: (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html) and "Instance store specifications"
#: (g4ad: one NVMe SSD of 150-2400 GB; g3, g3s, p2 and p3 are EBS only). Every one is sold as spot.
SUPPLEMENT: dict[str, tuple[str, str, int, float, int, float, int, int]] = {
    "p2.xlarge": ("NVIDIA", "K80", 1, 12, 4, 61, 0, 0),
    "p2.8xlarge": ("NVIDIA", "K80", 8, 12, 32, 488, 0, 0),
    "p2.16xlarge": ("NVIDIA", "K80", 16, 12, 64, 732, 0, 0),
    "p3.2xlarge": ("NVIDIA", "V100", 1, 16, 8, 61, 0, 0),
    "p3.8xlarge": ("NVIDIA", "V100", 4, 16, 32, 244, 0, 0),
    "p3.16xlarge": ("NVIDIA", "V100", 8, 16, 64, 488, 0, 0),
    "g3s.xlarge": ("NVIDIA", "M60", 1, 8, 4, 30.5, 0, 0),
    "g3.4xlarge": ("NVIDIA", "M60", 1, 8, 16, 122, 0, 0),
    "g3.8xlarge": ("NVIDIA", "M60", 2, 8, 32, 244, 0, 0),
    "g3.16xlarge": ("NVIDIA", "M60", 4, 8, 64, 488, 0, 0),
    "g4ad.xlarge": ("AMD", "Radeon Pro V520", 1, 8, 4, 16, 1, 150),
    "g4ad.2xlarge": ("AMD", "Radeon Pro V520", 1, 8, 8, 32, 1, 300),
    "g4ad.4xlarge": ("AMD", "Radeon Pro V520", 1, 8, 16, 64, 1, 600),
    "g4ad.8xlarge": ("AMD", "Radeon Pro V520", 2, 8, 32, 128, 1, 1200),
    "g4ad.16xlarge": ("AMD", "Radeon Pro V520", 4, 8, 64, 256, 1, 2400),
}


def _site() -> Path:
    import botocore

    return Path(botocore.__file__).resolve().parent.parent


def _json(path: Path) -> Any:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _local_nvme(info: dict[str, Any]) -> dict[str, Any]:
    """The instance store as NVMe SSDs (what the pool mounts as the local checkpoint tier), if the type has one.

    ``InstanceStorageInfo``: ``Disks`` [{Count, SizeInGB, Type}], ``NvmeSupport``; an HDD or
    non-NVMe store is not recorded (the tier wants NVMe's bandwidth; a RAM disk stands in).
    """
    storage = info.get("InstanceStorageInfo") or {}
    disks = [d for d in storage.get("Disks", []) if d.get("Type") == "ssd"]
    if not disks or storage.get("NvmeSupport") not in ("required", "supported"):
        return {}
    return {"localNvmeDisks": sum(int(d.get("Count", 0)) for d in disks),
            "localNvmeGB": sum(int(d.get("Count", 0)) * int(d.get("SizeInGB", 0)) for d in disks)}


def build() -> dict[str, Any]:
    """The catalogue document, without the generation timestamp (so it can be compared)."""
    site = _site()
    models = sorted((site / "botocore" / "data" / "ec2").glob("*/service-2.json*"))
    names = sorted(_json(models[-1])["shapes"]["InstanceType"]["enum"])
    moto_res = site / "moto" / "ec2" / "resources"
    described = _json(moto_res / "instance_types.json.gz")
    gpus: dict[str, dict[str, Any]] = {}
    for name in names:
        info = described.get(name, {})
        gpu_info = info.get("GpuInfo")
        entry: dict[str, Any] | None = None
        if gpu_info and gpu_info.get("Gpus"):
            first = gpu_info["Gpus"][0]
            entry = {
                "gpuManufacturer": first.get("Manufacturer"),
                "gpuModel": first.get("Name"),
                "gpuCount": sum(g.get("Count", 0) for g in gpu_info["Gpus"]),
                "gpuMemoryGiB": round(first.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024, 1),
                "from": "DescribeInstanceTypes",
            }
        elif name in SUPPLEMENT:
            maker, model, count, gib, vcpus, memory, disks, nvme = SUPPLEMENT[name]
            entry = {"gpuManufacturer": maker, "gpuModel": model, "gpuCount": count, "gpuMemoryGiB": float(gib),
                     "from": "supplement", "vcpus": vcpus, "memoryGiB": float(memory), "spot": True,
                     **({"localNvmeDisks": disks, "localNvmeGB": nvme} if disks else {})}
        if entry is None:
            continue
        if info:
            entry["vcpus"] = info.get("VCpuInfo", {}).get("DefaultVCpus")
            entry["memoryGiB"] = round(info.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024, 1)
            entry["spot"] = "spot" in info.get("SupportedUsageClasses", [])
            entry.update(_local_nvme(info))
        gpus[name] = entry
    regions: dict[str, dict[str, Any]] = {}
    for path in sorted((moto_res / "instance_type_offerings" / "region").glob("*.json*")):
        region = path.name.split(".")[0]
        offered = {o["InstanceType"] for o in _json(path)}
        az_path = moto_res / "instance_type_offerings" / "availability-zone" / path.name
        zones = sorted({o["Location"] for o in _json(az_path)}) if az_path.exists() else []
        regions[region] = {"zones": zones, "gpuTypes": sorted(offered & gpus.keys())}
    return {
        "cloud": "aws",
        "source": (
            "botocore EC2 service model (shape InstanceType) for the type names; moto's recorded AWS "
            "DescribeInstanceTypes (GpuInfo, MemoryInfo, InstanceStorageInfo) and DescribeInstanceTypeOfferings (regions, zones) for GPUs and "
            "where they are offered; 'supplement' rows by hand from docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
        ),
        "inputs": {"botocore": metadata.version("botocore"), "moto": metadata.version("moto")},
        "generator": "tools/gen_catalogue_aws.py",
        "instanceTypes": names,
        "gpuTypes": gpus,
        "regions": regions,
    }


def main() -> int:
    doc = {**build(), "generated": datetime.now(UTC).strftime("%Y-%m-%d")}
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(doc['instanceTypes'])} types, {len(doc['gpuTypes'])} GPU types, "
          f"{len(doc['regions'])} regions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
