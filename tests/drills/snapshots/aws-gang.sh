#!/bin/bash
# spotgpu bootstrap: install the node agent for pool train-a100 (aws, spot).
# Periodic checkpoints protect the work; the agent turns a notice into stop-new-work,
# a best-effort final checkpoint and a drain.
set -euo pipefail
install -d -m 0755 /etc/spotgpu /opt/spotgpu /run/spotgpu
cat > /etc/spotgpu/agent.json <<'SPOTGPU_CONFIG'
{
 "capacityType": "spot",
 "checkpointIntervalSeconds": 900,
 "checkpointStore": "s3://spotgpu-ckpt-prod/train-a100",
 "controlSocket": "/run/spotgpu/agent.sock",
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
  /opt/spotgpu/venv/bin/pip install --quiet 'spotgpu[aws,torch]'
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
cat > /etc/systemd/system/spotgpu-gang.service <<'SPOTGPU_UNIT'
[Unit]
Description=spotgpu gang launch (torchrun, rendezvous 10.0.1.10:29400)
After=spotgpu-agent.service network-online.target
Wants=spotgpu-agent.service network-online.target

[Service]
Environment=SPOTGPU_AGENT=/run/spotgpu/agent.sock
ExecStart=/opt/spotgpu/venv/bin/spotgpu gang run --max-failures=3 -- torchrun --nnodes=4:4 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=10.0.1.10:29400 --rdzv-id=train-a100 --rdzv-conf=is_host=false,join_timeout=1800,last_call_timeout=30,keep_alive_interval=5,keep_alive_max_attempt=3 --max-restarts=0 --monitor-interval=0.5 /opt/job/venv/bin/train.py --ckpt s3://spotgpu-ckpt-prod/train-a100
Restart=on-abnormal
RestartSec=5

[Install]
WantedBy=multi-user.target
SPOTGPU_UNIT
systemctl daemon-reload
systemctl enable --now spotgpu-gang.service
