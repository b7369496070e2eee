#!/bin/bash
# spotgpu bootstrap: install the node agent for pool train-a100 (aws, spot).
# Periodic checkpoints protect the work; the agent turns a notice into stop-new-work,
# a best-effort final checkpoint and a drain.
set -euo pipefail
install -d -m 0755 /etc/spotgpu /opt/spotgpu /run/spotgpu
cat > /etc/spotgpu/agent.json <<'SPOTGPU_CONFIG'
{
 "autoscalingGroup": "train-a100-asg",
 "capacityType": "spot",
 "checkpointIntervalSeconds": 900,
 "checkpointStore": "s3://spotgpu-ckpt-prod/train-a100",
 "controlSocket": "/run/spotgpu/agent.sock",
 "lifecycleHook": "spotgpu-drain",
 "notice": {
  "interruptionBehavior": "terminate",
  "provider": "aws",
  "safetyMarginSeconds": 15.0,
  "watchRebalance": true
 },
 "pool": "train-a100",
 "provider": "aws",
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
