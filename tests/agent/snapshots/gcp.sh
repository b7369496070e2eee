#!/bin/bash
# spotgpu bootstrap: install the node agent for pool train-l4 (gcp, spot).
# Periodic checkpoints protect the work; the agent turns a notice into stop-new-work,
# a best-effort final checkpoint and a drain.
set -euo pipefail
install -d -m 0755 /etc/spotgpu /opt/spotgpu /run/spotgpu
cat > /etc/spotgpu/agent.json <<'SPOTGPU_CONFIG'
{
 "capacityType": "spot",
 "checkpointIntervalSeconds": 600,
 "checkpointStore": "gs://spotgpu-ckpt-prod/train-l4",
 "controlSocket": "/run/spotgpu/agent.sock",
 "notice": {
  "preemptionNoticeSeconds": 120,
  "provider": "gcp",
  "safetyMarginSeconds": 15.0,
  "shutdownSeconds": 30.0
 },
 "pool": "train-l4",
 "provider": "gcp",
 "telemetryPort": 9464
}
SPOTGPU_CONFIG
if [ ! -x /opt/spotgpu/venv/bin/spotgpu ]; then
  python3 -m venv /opt/spotgpu/venv
  /opt/spotgpu/venv/bin/pip install --quiet spotgpu==0.1.0
fi
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
