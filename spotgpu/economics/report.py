"""Per-pool economics for the preview: interval now; effective cost joins in issue 9."""

from __future__ import annotations

from typing import Any

from spotgpu.economics.interval import choose_interval
from spotgpu.models import StackConfig


def stack_economics(config: StackConfig) -> dict[str, Any]:
    pools = {}
    for pool in config.pools:
        workload = config.workload_for(pool)
        decision = choose_interval(workload, pool.notice)
        pools[pool.name] = {
            "cloud": pool.cloud,
            "workload": pool.workload,
            "checkpointIntervalSeconds": decision.seconds,
            "intervalMethod": decision.method,
            "finalCheckpointFitsNotice": decision.final_checkpoint_fits_notice,
            "reasons": list(decision.reasons),
        }
    return {"pools": pools}


def render_economics(report: dict[str, Any]) -> str:
    lines = ["Economics per pool:"]
    for name, p in report.get("pools", {}).items():
        fits = "fits" if p["finalCheckpointFitsNotice"] else "does NOT fit"
        lines.append(
            f"  {name} ({p['cloud']}, {p['workload']}): checkpoint every {p['checkpointIntervalSeconds']} s "
            f"({p['intervalMethod']}); final checkpoint {fits} the notice"
        )
    return "\n".join(lines)
