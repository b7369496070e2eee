"""The local checkpoint tier at boot: the instance's NVMe, or a RAM disk where it has none.

A tiered workload's pool (``checkpointTiers``) writes :func:`tier_script` to
``/opt/spotgpu/local-tier.sh`` and runs it from ``spotgpu-local-tier.service`` at *every* boot,
before the agent and the gang launch: an instance store or local SSD is empty after a stop
and start, and user data runs only once. The script

1. finds the local NVMe disks by what the provider calls them: AWS instance store
   (``Amazon EC2 NVMe Instance Storage``), Azure NVMe temp disks (``Microsoft NVMe Direct
   Disk``), GCP Local SSD (``/dev/disk/by-id/google-local-nvme-ssd-*``; the instance template
   requests them, ``spotgpu_pulumi.gcp``); EBS, persistent disks and OS disks never match;
2. stripes several into one RAID 0 (``mdadm``; a checkpoint tier wants bandwidth, and a lost
   disk loses the VM's tier either way), formats it ext4 and mounts it at the tier's path; where
   the image already mounted them (the AWS Deep Learning AMIs mount the instance store at
   ``/opt/dlami/nvme``), it bind-mounts a directory of that mount instead;
3. mounts a RAM disk (tmpfs, sized from the workload's state) where there is none, or where
   formatting failed, so the tier exists on every type;
4. records what it mounted in ``<path>/.spotgpu-tier.json`` (``medium``: nvme or ramdisk).

``SPOTGPU_SYSFS`` and ``SPOTGPU_DEV`` move ``/sys`` and ``/dev`` for the tests, which run the
script against a fake sysfs with stub ``mdadm``, ``mkfs.ext4`` and ``mount``.
"""

from __future__ import annotations

import shlex

from spotgpu.models.tiers import LocalTierConfig

#: The oneshot unit that mounts the tier; the agent and the gang launch start after it.
TIER_UNIT = "spotgpu-local-tier.service"
TIER_SCRIPT = "/opt/spotgpu/local-tier.sh"
#: Written on the mounted tier: what the boot script found (``medium``, ``devices``).
TIER_RECORD = ".spotgpu-tier.json"
#: NVMe model names of local (instance) disks, by provider; AWS EBS is ``Amazon Elastic Block Store``.
NVME_MODELS = {"aws": ("Amazon EC2 NVMe Instance Storage",), "azure": ("Microsoft NVMe Direct Disk",)}
#: GCP names its Local SSDs in /dev/disk/by-id (persistent disks are ``google-<name>``).
GCP_LOCAL_SSD_GLOB = "disk/by-id/google-local-nvme-ssd-*"


def _find_disks(provider: str) -> str:
    if provider == "gcp":
        return f"""for link in "$dev"/{GCP_LOCAL_SSD_GLOB}; do
  [ -e "$link" ] && disks+=("$(readlink -f "$link")")
done
"""
    cases = "|".join(shlex.quote(m) + "*" for m in NVME_MODELS[provider])
    return f"""for block in "$sysfs"/block/nvme*n*; do
  [ -r "$block/device/model" ] || continue
  case "$(tr -d '\\0' < "$block/device/model" | sed 's/ *$//')" in
    {cases}) disks+=("$dev/${{block##*/}}") ;;
  esac
done
"""


def tier_script(provider: str, tier: LocalTierConfig) -> str:
    """The boot script that mounts ``tier.path`` (see the module docstring)."""
    path = shlex.quote(tier.path)
    return f"""#!/bin/bash
# spotgpu local checkpoint tier: the instance's local NVMe (RAID 0 over all of them) at {tier.path},
# else a {tier.ram_disk_gib} GiB RAM disk. Runs at every boot: local disks are empty after a stop.
set -uo pipefail
dir={path}
sysfs=${{SPOTGPU_SYSFS:-/sys}}
dev=${{SPOTGPU_DEV:-/dev}}
install -d -m 0755 "$dir"
if mountpoint -q "$dir"; then exit 0; fi
disks=()
{_find_disks(provider)}used=""
for disk in "${{disks[@]}}"; do  # already mounted (an image that mounts the instance store itself): share it
  for holder in "$sysfs/block/${{disk##*/}}"/holders/*; do [ -e "$holder" ] && disk="$dev/${{holder##*/}}"; done
  used=$(findmnt -n -o TARGET --source "$disk" 2>/dev/null | head -n 1)
  [ -n "$used" ] && break
done
target=""
if [ -n "$used" ]; then
  disks=()
elif [ ${{#disks[@]}} -gt 1 ] && command -v mdadm >/dev/null; then
  mdadm --create "$dev/md/spotgpu-local" --run --force --level=0 --raid-devices=${{#disks[@]}} "${{disks[@]}}" \\
    && target="$dev/md/spotgpu-local"
elif [ ${{#disks[@]}} -ge 1 ]; then
  target=${{disks[0]}}
fi
medium=ramdisk
if [ -n "$used" ] && install -d -m 0755 "$used/spotgpu-local" && mount --bind "$used/spotgpu-local" "$dir"; then
  medium=nvme
elif [ -n "$target" ] && mkfs.ext4 -F -q -L spotgpu-local -E lazy_itable_init=1,nodiscard "$target" \\
  && mount -o noatime "$target" "$dir"; then
  medium=nvme
else
  mount -t tmpfs -o size={tier.ram_disk_gib}G,mode=0755 spotgpu-local "$dir" || exit 1
fi
printf '{{"medium": "%s", "devices": "%s", "sharedMount": "%s"}}\\n' "$medium" "${{disks[*]:-}}" "$used" \\
  > "$dir/{TIER_RECORD}"
"""


def tier_unit(dependents: tuple[str, ...]) -> str:
    """The oneshot unit running :data:`TIER_SCRIPT` at every boot, before ``dependents``."""
    before = " ".join(dependents)
    return f"""[Unit]
Description=spotgpu local checkpoint tier (local NVMe, else a RAM disk)
DefaultDependencies=no
After=local-fs.target
Before={before}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash {TIER_SCRIPT}

[Install]
WantedBy=multi-user.target
"""


def render_tier_setup(provider: str, tier: LocalTierConfig, dependents: tuple[str, ...]) -> str:
    """The bootstrap lines that install the script and its unit and mount the tier now."""
    return f"""cat > {TIER_SCRIPT} <<'SPOTGPU_TIER'
{tier_script(provider, tier)}SPOTGPU_TIER
cat > /etc/systemd/system/{TIER_UNIT} <<'SPOTGPU_UNIT'
{tier_unit(dependents)}SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now {TIER_UNIT} || echo "spotgpu: the local checkpoint tier did not mount (journalctl -u {TIER_UNIT}); saves go to the object store" >&2
"""
