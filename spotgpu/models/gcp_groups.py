"""Which of a GCP pool's machine types share one instance template, hence one MIG.

The one rule the GCP planner builds its templates and MIGs from (``spotgpu_pulumi.gcp.plan``) and
the type lists the stack check, the economics and the rendered controller config read
(:func:`spotgpu.models.pool_types.spot_groups`), so what a rung is priced with is what the MIG it
resizes can launch.

A MIG's instance flexibility policy overrides only the *machine type* of its template; what else
the template says applies to every VM:

* ``guest_accelerators``: accelerator-optimized types (A2, A3, G2, ...) carry their GPUs and must
  have none, while N1 needs them, so all accelerator-optimized types share one signature and N1
  types one per (accelerator type, count): ``aopt``, ``t4x1``, ``v100x8``;
* Local SSDs: a tiered workload (``checkpointTiers``) mounts each VM's Local SSDs as its checkpoint
  tier, so its templates request the count a type comes with (A2 Ultra, A3, A4: fixed per type,
  :func:`spotgpu.catalogue.gcp_local_ssd_count`), and the count joins the signature:
  ``aopt-lssd4``, ``aopt-lssd8``. Without tiers no template requests any and the groups are as before.

Groups are ordered by their best-ranked member: group 0, the one holding the pool's first type,
is the primary spot MIG (``same_pool`` and ``alternate_zone`` grow it, and the on-demand fallback
MIG is built from its template); the others start at 0 and only the ``alternate_sku`` rung grows them.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotgpu.catalogue import gcp_local_ssd_count
from spotgpu.models.pools import GcpAccelerator, GcpMachineChoice, GcpPoolSpec
from spotgpu.models.workload import WorkloadProfile


@dataclass(frozen=True)
class MachineGroup:
    """Machine types that can share one instance template (same accelerator signature and Local SSDs)."""

    key: str
    accelerator: GcpAccelerator | None
    machine_types: tuple[str, ...]
    #: Local SSDs (375 GiB, NVMe) the template requests for every VM: a tiered workload's checkpoint tier
    local_ssds: int = 0
    #: Split off by its Local SSD count alone: without tiers its types would be in an earlier group
    ssd_split: bool = False

    @property
    def top_type(self) -> str:
        """The template's machine type: instance flexibility overrides it, so use the preferred one."""
        return self.machine_types[0]

    def describe(self) -> str:
        """How a message names the group: ``MIG aopt-lssd8 (accelerator-optimized, 8 Local SSDs per VM)``."""
        if self.accelerator is not None:
            return f"MIG {self.key} ({self.accelerator.count} x {self.accelerator.type} attached)"
        ssds = f", {self.local_ssds} Local SSDs per VM" if self.local_ssds else ""
        return f"MIG {self.key} (accelerator-optimized{ssds})"

    def template_says(self) -> str:
        """What of the group's template applies to every VM: ``attaches 1 x nvidia-tesla-t4``."""
        if self.accelerator is not None:
            return f"attaches {self.accelerator.count} x {self.accelerator.type}"
        ssds = f" and requests {self.local_ssds} Local SSDs" if self.local_ssds else ""
        return f"attaches no GPU (accelerator-optimized types carry theirs){ssds}"

    def apart_from(self, primary: MachineGroup) -> str:
        """Why the group has a MIG of its own, not the primary's: what a finding about it says."""
        if self.ssd_split:
            mine = f"requests {self.local_ssds} Local SSDs" if self.local_ssds else "requests no Local SSD"
            theirs = f"{primary.local_ssds}" if primary.local_ssds else "none"
            return f"a MIG has one instance template, and this one {mine} per VM where the primary's requests {theirs}"
        return (f"a MIG has one instance template, and this one {self.template_says()} where the primary's "
                f"{primary.template_says()}")  # fmt: skip


def accelerator_key(accelerator: GcpAccelerator | None) -> str:
    """Stable short key of an accelerator signature: ``aopt`` or e.g. ``t4x1``, ``v100x8``."""
    if accelerator is None:
        return "aopt"
    short = accelerator.type.removeprefix("nvidia-").removeprefix("tesla-")
    return f"{short}x{accelerator.count}".replace("_", "-")


def requests_local_ssd(workload: WorkloadProfile) -> bool:
    """Whether the pool's templates request their types' Local SSDs: the workload keeps a local checkpoint tier."""
    return workload.checkpoint_tiers is not None


Signature = tuple[tuple[str, int] | None, int]


def _signature(choice: GcpMachineChoice, local_ssd: bool) -> Signature:
    if choice.accelerator is not None:  # N1: no bundled Local SSD
        return ((choice.accelerator.type, choice.accelerator.count), 0)
    return (None, gcp_local_ssd_count(choice.machine_type) if local_ssd else 0)


def group_machine_choices(choices: tuple[GcpMachineChoice, ...], local_ssd: bool = False) -> tuple[MachineGroup, ...]:
    """Ranked choices -> groups ordered by their best-ranked member; group 0 is the primary.

    The spec lists each choice once (``GcpPoolSpec`` refuses a machine type twice with the same accelerator).
    ``local_ssd``: the templates request each type's bundled Local SSDs (a tiered workload).
    """
    order: list[Signature] = []
    members: dict[Signature, list[GcpMachineChoice]] = {}
    for choice in choices:
        sig = _signature(choice, local_ssd)
        if sig not in members:
            order.append(sig)
            members[sig] = []
        members[sig].append(choice)
    return tuple(
        MachineGroup(
            key=accelerator_key(members[sig][0].accelerator) + (f"-lssd{sig[1]}" if sig[1] else ""),
            accelerator=members[sig][0].accelerator,
            machine_types=tuple(c.machine_type for c in members[sig]),
            local_ssds=sig[1],
            ssd_split=any(other[0] == sig[0] for other in order[:i]),
        )
        for i, sig in enumerate(order)
    )


def machine_groups(pool: GcpPoolSpec, workload: WorkloadProfile) -> tuple[MachineGroup, ...]:
    """The pool's spot MIGs as the planner creates them for ``workload``, the primary first."""
    return group_machine_choices(pool.machine_types, local_ssd=requests_local_ssd(workload))
