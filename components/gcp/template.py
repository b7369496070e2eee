"""The regional instance template both spot and on-demand groups use (one shape, two schedulings)."""

from __future__ import annotations

import pulumi
from pulumi_gcp import compute

from spotgpu.models.gcp_groups import MachineGroup
from spotgpu.models.pools import GcpPoolSpec
from spotgpu_pulumi.inputs import as_input

#: Every Local SSD disk is 375 GiB (spotgpu/catalogue/data/local_storage.json, ``gcpLocalSsdGiB``).
LOCAL_SSD_GB = 375


def local_ssd_disks(count: int) -> list[compute.RegionInstanceTemplateDiskArgsDict]:
    """``count`` scratch Local SSDs on NVMe (the boot script finds them as google-local-nvme-ssd-N)."""
    return [
        {"type": "SCRATCH", "disk_type": "local-ssd", "disk_size_gb": LOCAL_SSD_GB, "interface": "NVME", "auto_delete": True}
        for _ in range(count)
    ]


def region_template(
    resource_name: str,
    *,
    spec: GcpPoolSpec,
    group: MachineGroup,
    scheduling: compute.RegionInstanceTemplateSchedulingArgsDict,
    name_prefix: str,
    metadata: dict[str, str],
    startup_script: str,
    labels: dict[str, str],
    service_account_email: pulumi.Input[str],
    parent: pulumi.Resource,
) -> compute.RegionInstanceTemplate:
    """Template for ``group``: its top-ranked type (flexibility overrides it), GPUs only for N1, and the
    Local SSDs its types come with when the workload keeps a local checkpoint tier on them.

    Templates are immutable, so they use ``name_prefix`` and create-before-delete:
    a change makes a new template and the MIG switches to it.
    """
    interface: compute.RegionInstanceTemplateNetworkInterfaceArgsDict = {
        "network": as_input(spec.network),
        "subnetwork": as_input(spec.subnetwork),
    }
    if spec.external_ip:
        interface["access_configs"] = [{}]
    accelerators: list[compute.RegionInstanceTemplateGuestAcceleratorArgsDict] = (
        [{"type": group.accelerator.type, "count": group.accelerator.count}] if group.accelerator else []
    )
    return compute.RegionInstanceTemplate(
        resource_name,
        project=spec.project,
        region=spec.region,
        name_prefix=name_prefix,
        machine_type=group.top_type,
        guest_accelerators=accelerators,
        scheduling=scheduling,
        disks=[
            {
                "boot": True,
                "auto_delete": True,
                "source_image": as_input(spec.image),
                "disk_size_gb": spec.boot_disk_gb,
                "disk_type": spec.boot_disk_type,
            },
            *local_ssd_disks(group.local_ssds),
        ],
        network_interfaces=[interface],
        service_account={"email": service_account_email, "scopes": ["cloud-platform"]},
        shielded_instance_config={
            "enable_secure_boot": spec.secure_boot,
            "enable_vtpm": True,
            "enable_integrity_monitoring": True,
        },
        metadata={**metadata, "enable-oslogin": "TRUE"},
        metadata_startup_script=startup_script,
        labels=labels,
        opts=pulumi.ResourceOptions(parent=parent),
    )
