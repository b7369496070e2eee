"""The local-tier boot script, run for real against a fake sysfs and /dev (issue 33, item 4).

``mdadm``, ``mkfs.ext4``, ``mount``, ``mountpoint`` and ``findmnt`` are stubs on PATH that log
their arguments (and fail or answer where a case says so); everything else (bash, ``install``,
``readlink``, ``tr``, ``sed``) is the real thing. Each case checks which disks the script takes,
how it mounts them, and the record it leaves on the tier.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from spotgpu.bootstrap_tier import TIER_RECORD, tier_script
from spotgpu.models.tiers import LocalTierConfig

STUBS = {
    "mdadm": 'echo "mdadm $*" >> "$LOG"',
    "mkfs.ext4": 'echo "mkfs.ext4 $*" >> "$LOG"; [ -z "${FAIL_MKFS:-}" ]',
    "mount": 'echo "mount $*" >> "$LOG"',
    "mountpoint": "exit 1",
    "findmnt": 'for a in "$@"; do [ "$a" = "${MOUNTED_DEV:-none}" ] && echo "$MOUNTED_AT"; done; exit 0',
}


def run(tmp_path: Path, provider: str, nvme: dict[str, str], by_id: dict[str, str] | None = None,
        **env: str) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """Run the script for ``provider`` with NVMe controllers ``{name: model}``; (logged commands, record)."""
    sysfs, dev, bin_dir, tier = tmp_path / "sys", tmp_path / "dev", tmp_path / "bin", tmp_path / "tier"
    for name, model in nvme.items():
        (sysfs / "block" / name / "device").mkdir(parents=True)
        (sysfs / "block" / name / "device" / "model").write_text(model.ljust(40) + "\n")
        (dev / name).parent.mkdir(parents=True, exist_ok=True)
        (dev / name).write_text("")
    for link, target in (by_id or {}).items():
        (dev / "disk" / "by-id").mkdir(parents=True, exist_ok=True)
        (dev / target).write_text("")
        (dev / "disk" / "by-id" / link).symlink_to(dev / target)
    bin_dir.mkdir()
    for name, body in STUBS.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = tmp_path / "local-tier.sh"
    config = LocalTierConfig(path=str(tier), keep=2, peer_copies=1, durable_interval_seconds=1800, ram_disk_gib=40)
    script.write_text(tier_script(provider, config))
    log = tmp_path / "log"
    log.write_text("")
    environment = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log),
                   "SPOTGPU_SYSFS": str(sysfs), "SPOTGPU_DEV": str(dev), **env}  # fmt: skip
    done = subprocess.run(["bash", str(script)], env=environment, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    record = json.loads((tier / TIER_RECORD).read_text())
    return [line.replace(str(tmp_path), "") for line in log.read_text().splitlines()], record


EBS = "Amazon Elastic Block Store"
STORE = "Amazon EC2 NVMe Instance Storage"


def test_aws_stripes_every_instance_store_disk_and_never_the_ebs_volume(tmp_path: Path) -> None:
    log, record = run(tmp_path, "aws", {"nvme0n1": EBS, "nvme1n1": STORE, "nvme2n1": STORE})
    assert log[0] == "mdadm --create /dev/md/spotgpu-local --run --force --level=0 --raid-devices=2 /dev/nvme1n1 /dev/nvme2n1"
    assert log[1].startswith("mkfs.ext4 -F -q -L spotgpu-local") and log[1].endswith("/dev/md/spotgpu-local")
    assert log[2] == "mount -o noatime /dev/md/spotgpu-local /tier"
    assert record["medium"] == "nvme"


def test_aws_one_disk_is_formatted_as_it_is(tmp_path: Path) -> None:
    log, record = run(tmp_path, "aws", {"nvme0n1": EBS, "nvme1n1": STORE})
    assert not any(line.startswith("mdadm") for line in log)
    assert log[-1] == "mount -o noatime /dev/nvme1n1 /tier" and record["medium"] == "nvme"


def test_a_type_without_local_disk_gets_the_ram_disk(tmp_path: Path) -> None:
    log, record = run(tmp_path, "aws", {"nvme0n1": EBS})
    assert log == ["mount -t tmpfs -o size=40G,mode=0755 spotgpu-local /tier"]
    assert record == {"medium": "ramdisk", "devices": "", "sharedMount": ""}


def test_a_failed_format_falls_back_to_the_ram_disk(tmp_path: Path) -> None:
    log, record = run(tmp_path, "aws", {"nvme1n1": STORE}, FAIL_MKFS="1")
    assert log[-1] == "mount -t tmpfs -o size=40G,mode=0755 spotgpu-local /tier" and record["medium"] == "ramdisk"


def test_an_instance_store_the_image_already_mounted_is_shared_not_reformatted(tmp_path: Path) -> None:
    """The AWS Deep Learning AMIs mount the instance store at /opt/dlami/nvme themselves."""
    log, record = run(tmp_path, "aws", {"nvme1n1": STORE}, MOUNTED_DEV=f"{tmp_path}/dev/nvme1n1",
                      MOUNTED_AT=str(tmp_path / "dlami"))  # fmt: skip
    assert not any(line.startswith(("mkfs", "mdadm")) for line in log)
    assert log == ["mount --bind /dlami/spotgpu-local /tier"] and record["medium"] == "nvme"
    assert (tmp_path / "dlami" / "spotgpu-local").is_dir()


def test_gcp_takes_its_local_ssds_by_id(tmp_path: Path) -> None:
    log, record = run(tmp_path, "gcp", {"nvme0n1": "nvme_card-pd"},
                      by_id={"google-local-nvme-ssd-0": "nvme0n2", "google-local-nvme-ssd-1": "nvme0n3"})  # fmt: skip
    assert log[0] == "mdadm --create /dev/md/spotgpu-local --run --force --level=0 --raid-devices=2 /dev/nvme0n2 /dev/nvme0n3"
    assert record["medium"] == "nvme"


@pytest.mark.parametrize("model", ["Microsoft NVMe Direct Disk", "Microsoft NVMe Direct Disk v2"])
def test_azure_takes_its_nvme_temp_disks(tmp_path: Path, model: str) -> None:
    log, _ = run(tmp_path, "azure", {"nvme0n1": "MSFT NVMe Accelerator v1.0", "nvme1n1": model})
    assert log[-1] == "mount -o noatime /dev/nvme1n1 /tier"


def test_a_mounted_tier_is_left_alone(tmp_path: Path) -> None:
    """At the next boot of a VM that was never stopped (the unit runs again): nothing to do."""
    tier = tmp_path / "tier"
    STUBS_MOUNTED = dict(STUBS, mountpoint="exit 0")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STUBS_MOUNTED.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = tmp_path / "s.sh"
    script.write_text(tier_script("aws", LocalTierConfig(path=str(tier), keep=1, peer_copies=0,
                                                         durable_interval_seconds=60, ram_disk_gib=1)))  # fmt: skip
    log = tmp_path / "log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)}
    assert subprocess.run(["bash", str(script)], env=env, timeout=30).returncode == 0
    assert not log.exists() and not (tier / TIER_RECORD).exists()
