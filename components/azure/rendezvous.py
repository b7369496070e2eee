"""``spotgpu:azure:RendezvousHost``: the on-demand VM that hosts a gang pool's rendezvous store.

The Azure counterpart of ``spotgpu_pulumi.gcp.rendezvous``: a Regular-priority (never Spot)
Linux VM at a fixed private address in the pool's subnet, serving ``spotgpu gang store``
under systemd, and a network security group on its NIC admitting the store's TCP port only
from the pool's VMs.

"The pool's VMs" is an application security group: every spot and fallback scale set's NIC
joins it (only in a gang pool), and the NSG's allow rule names it as the source. That is
Azure's form of the AWS rule's security-group source and the GCP rule's service-account
source. The subnet's address range would admit every other VM in the subnet, and the spec
holds only the subnet's ARM id (possibly an Output), so its range would need a provider
read; the ``VirtualNetwork`` service tag would admit the whole network and its peerings.
A second rule denies every other inbound connection (Azure's default NSG rules admit all
of the virtual network), so the host serves the store and nothing else.

:func:`plan_azure_rendezvous` decides everything (pure); the component only builds it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_azure_native.compute as compute
import pulumi_azure_native.network as network

from spotgpu.bootstrap import render_store_bootstrap
from spotgpu.config import PlanError
from spotgpu.models.base import FieldProblem
from spotgpu.models.gang import AzureImage, GangLaunch
from spotgpu.models.pools import AzurePoolSpec
from spotgpu.models.refs import Ref
from spotgpu_pulumi.azure import naming
from spotgpu_pulumi.azure.profile import linux_ssh_only
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:azure:RendezvousHost"
#: The NSG rules' priorities: the allow first, the deny-everything-else last (Azure: 100..4096).
ALLOW_PRIORITY = 100
DENY_PRIORITY = 4096


@dataclass(frozen=True)
class AzureRendezvousPlan:
    name: str  # the VM's name and hostname; the NIC, NSG and pool group names derive from it
    resource_group: Ref
    location: str
    zone: str
    subnet_id: Ref
    private_ip: str
    port: int
    vm_size: str
    image: AzureImage
    admin_username: str
    ssh_public_key: str
    custom_data: str  # base64, as osProfile.customData requires
    launch: GangLaunch
    tags: dict[str, str]

    @property
    def nic_name(self) -> str:
        return f"{self.name}-nic"

    @property
    def nsg_name(self) -> str:
        return f"{self.name}-nsg"

    @property
    def pool_group_name(self) -> str:
        """The application security group every VM of the pool joins: the allow rule's source."""
        return f"{self.name}-pool"


def plan_azure_rendezvous(spec: AzurePoolSpec, environment: str, tags: dict[str, str]) -> AzureRendezvousPlan | None:
    """The pool's rendezvous host, or None for a pool that runs no gang (nothing changes then).

    Raises :class:`~spotgpu.config.PlanError` for a gang the host cannot serve.
    """
    gang = spec.gang
    if gang is None:
        return None
    host = gang.rendezvous
    zone = host.zone or spec.zones[0]
    if zone not in spec.zones:
        raise PlanError(
            FieldProblem(
                f"is not one of the pool's zones {list(spec.zones)}", at="gang.rendezvous.zone", value=zone,
                fix=f"use one of {list(spec.zones)} (where the pool's VMs run), or leave zone out for {spec.zones[0]!r}",
            ),
            pool=spec.name,
        )
    return AzureRendezvousPlan(
        name=naming.rendezvous_name(spec.name, environment),
        resource_group=spec.resource_group_name,
        location=spec.location,
        zone=zone,
        subnet_id=spec.subnet_id,
        private_ip=host.private_ip,
        port=gang.port,
        vm_size=host.vm_size,
        image=host.image or spec.image,
        admin_username=spec.admin_username,
        ssh_public_key=spec.ssh_public_key,
        custom_data=base64.b64encode(render_store_bootstrap(gang.port, spec.agent_package).encode()).decode(),
        launch=gang.launch(spec.name, host.private_ip),
        tags=tags,
    )


class AzureRendezvousHost(pulumi.ComponentResource):
    """The pool's application security group, an NSG (the port from that group only), a NIC and one Regular VM."""

    def __init__(self, name: str, plan: AzureRendezvousPlan, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        resource_group = as_input(plan.resource_group)
        pool_group = network.ApplicationSecurityGroup(
            f"{name}-pool",
            application_security_group_name=plan.pool_group_name,
            resource_group_name=resource_group,
            location=plan.location,
            tags=plan.tags,
            opts=child,
        )
        nsg = network.NetworkSecurityGroup(
            f"{name}-nsg",
            network_security_group_name=plan.nsg_name,
            resource_group_name=resource_group,
            location=plan.location,
            security_rules=[
                network.SecurityRuleArgs(
                    name="rendezvous-from-pool",
                    description=f"spotgpu gang rendezvous store: tcp {plan.port} from the pool's VMs only",
                    priority=ALLOW_PRIORITY,
                    direction=network.SecurityRuleDirection.INBOUND,
                    access=network.SecurityRuleAccess.ALLOW,
                    protocol=network.SecurityRuleProtocol.TCP,
                    source_application_security_groups=[network.ApplicationSecurityGroupArgs(id=pool_group.id)],
                    source_port_range="*",
                    destination_address_prefix=plan.private_ip,
                    destination_port_range=str(plan.port),
                ),
                network.SecurityRuleArgs(
                    name="deny-other-inbound",
                    description="the host serves the store only; Azure's defaults would admit the whole network",
                    priority=DENY_PRIORITY,
                    direction=network.SecurityRuleDirection.INBOUND,
                    access=network.SecurityRuleAccess.DENY,
                    protocol=network.SecurityRuleProtocol.ASTERISK,
                    source_address_prefix="*",
                    source_port_range="*",
                    destination_address_prefix="*",
                    destination_port_range="*",
                ),
            ],
            tags=plan.tags,
            opts=child,
        )
        nic = network.NetworkInterface(
            f"{name}-nic",
            network_interface_name=plan.nic_name,
            resource_group_name=resource_group,
            location=plan.location,
            network_security_group=network.NetworkSecurityGroupArgs(id=nsg.id),
            ip_configurations=[
                network.NetworkInterfaceIPConfigurationArgs(
                    name="rendezvous-ip",
                    primary=True,
                    subnet=network.SubnetArgs(id=as_input(plan.subnet_id)),
                    private_ip_allocation_method=network.IPAllocationMethod.STATIC,
                    private_ip_address=plan.private_ip,
                    private_ip_address_version=network.IPVersion.I_PV4,
                )
            ],
            tags=plan.tags,
            opts=child,
        )
        image = plan.image
        vm = compute.VirtualMachine(
            f"{name}-host",
            vm_name=plan.name,
            resource_group_name=resource_group,
            location=plan.location,
            zones=[plan.zone],
            priority=compute.VirtualMachinePriorityTypes.REGULAR,  # never Spot: no notice takes the store down
            hardware_profile=compute.HardwareProfileArgs(vm_size=plan.vm_size),
            storage_profile=compute.StorageProfileArgs(
                image_reference=compute.ImageReferenceArgs(
                    publisher=image.publisher, offer=image.offer, sku=image.sku, version=image.version
                ),
                os_disk=compute.OSDiskArgs(
                    create_option=compute.DiskCreateOptionTypes.FROM_IMAGE,
                    delete_option=compute.DiskDeleteOptionTypes.DELETE,
                    managed_disk=compute.ManagedDiskParametersArgs(
                        storage_account_type=compute.StorageAccountTypes.STANDARD_SS_D_LRS
                    ),
                ),
            ),
            os_profile=compute.OSProfileArgs(
                computer_name=plan.name,
                admin_username=plan.admin_username,
                custom_data=plan.custom_data,
                linux_configuration=linux_ssh_only(plan.admin_username, plan.ssh_public_key),
            ),
            network_profile=compute.NetworkProfileArgs(
                network_interfaces=[compute.NetworkInterfaceReferenceArgs(id=nic.id, primary=True)]
            ),
            tags=plan.tags,
            opts=child,
        )
        self.address = pulumi.Output.from_input(plan.private_ip)
        self.vm_name = vm.id.apply(lambda _: plan.name)  # the planned name, once the VM exists
        self.pool_group_id = pool_group.id
        """The application security group the pool's scale-set NICs join (the NSG rule's source)."""
        self.register_outputs({"address": self.address, "vmName": self.vm_name, "poolGroupId": pool_group.id})
