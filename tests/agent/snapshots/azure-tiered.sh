#!/bin/bash
# spotgpu bootstrap: install the node agent for pool train-t4 (azure, on-demand).
# Periodic checkpoints protect the work; the agent turns a notice into stop-new-work,
# a best-effort final checkpoint and a drain.
set -euo pipefail
install -d -m 0755 /etc/spotgpu /opt/spotgpu /run/spotgpu
cat > /etc/spotgpu/agent.json <<'SPOTGPU_CONFIG'
{
 "capacityType": "on-demand",
 "checkpointIntervalSeconds": 300,
 "checkpointStore": "az://spotgpuckpt/checkpoints/train-t4",
 "controlSocket": "/run/spotgpu/agent.sock",
 "localTier": {
  "durableIntervalSeconds": 8910,
  "keep": 2,
  "path": "/var/lib/spotgpu/local",
  "peerCopies": 1,
  "ramDiskGiB": 224
 },
 "notice": {
  "minimumNoticeSeconds": 30.0,
  "provider": "azure",
  "safetyMarginSeconds": 15.0
 },
 "pool": "train-t4",
 "provider": "azure",
 "telemetryPort": 9464
}
SPOTGPU_CONFIG
if [ ! -x /opt/spotgpu/venv/bin/spotgpu ]; then
  python3 -m venv /opt/spotgpu/venv
  /opt/spotgpu/venv/bin/pip install --quiet spotgpu==0.1.0
fi
cat > /opt/spotgpu/local-tier.sh <<'SPOTGPU_TIER'
#!/bin/bash
# spotgpu local checkpoint tier: the instance's local NVMe (RAID 0 over all of them) at /var/lib/spotgpu/local,
# else a 224 GiB RAM disk. Runs at every boot: local disks are empty after a stop.
set -uo pipefail
dir=/var/lib/spotgpu/local
sysfs=${SPOTGPU_SYSFS:-/sys}
dev=${SPOTGPU_DEV:-/dev}
install -d -m 0755 "$dir"
if mountpoint -q "$dir"; then exit 0; fi
disks=()
for block in "$sysfs"/block/nvme*n*; do
  [ -r "$block/device/model" ] || continue
  case "$(tr -d '\0' < "$block/device/model" | sed 's/ *$//')" in
    'Microsoft NVMe Direct Disk'*) disks+=("$dev/${block##*/}") ;;
  esac
done
used=""
for disk in "${disks[@]}"; do  # already mounted (an image that mounts the instance store itself): share it
  for holder in "$sysfs/block/${disk##*/}"/holders/*; do [ -e "$holder" ] && disk="$dev/${holder##*/}"; done
  used=$(findmnt -n -o TARGET --source "$disk" 2>/dev/null | head -n 1)
  [ -n "$used" ] && break
done
target=""
if [ -n "$used" ]; then
  disks=()
elif [ ${#disks[@]} -gt 1 ] && command -v mdadm >/dev/null; then
  mdadm --create "$dev/md/spotgpu-local" --run --force --level=0 --raid-devices=${#disks[@]} "${disks[@]}" \
    && target="$dev/md/spotgpu-local"
elif [ ${#disks[@]} -ge 1 ]; then
  target=${disks[0]}
fi
medium=ramdisk
if [ -n "$used" ] && install -d -m 0755 "$used/spotgpu-local" && mount --bind "$used/spotgpu-local" "$dir"; then
  medium=nvme
elif [ -n "$target" ] && mkfs.ext4 -F -q -L spotgpu-local -E lazy_itable_init=1,nodiscard "$target" \
  && mount -o noatime "$target" "$dir"; then
  medium=nvme
else
  mount -t tmpfs -o size=224G,mode=0755 spotgpu-local "$dir" || exit 1
fi
printf '{"medium": "%s", "devices": "%s", "sharedMount": "%s"}\n' "$medium" "${disks[*]:-}" "$used" \
  > "$dir/.spotgpu-tier.json"
SPOTGPU_TIER
cat > /etc/systemd/system/spotgpu-local-tier.service <<'SPOTGPU_UNIT'
[Unit]
Description=spotgpu local checkpoint tier (local NVMe, else a RAM disk)
DefaultDependencies=no
After=local-fs.target
Before=spotgpu-agent.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash /opt/spotgpu/local-tier.sh

[Install]
WantedBy=multi-user.target
SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now spotgpu-local-tier.service || echo "spotgpu: the local checkpoint tier did not mount (journalctl -u spotgpu-local-tier.service); saves go to the object store" >&2
cat > /etc/systemd/system/spotgpu-agent.service <<'SPOTGPU_UNIT'
[Unit]
Description=spotgpu node agent (interruption notices, drain, telemetry)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=/opt/spotgpu/venv/bin/spotgpu agent run --config /etc/spotgpu/agent.json
Restart=always
RestartSec=2
RuntimeDirectory=spotgpu

[Install]
WantedBy=multi-user.target
SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now spotgpu-agent.service
