"""``spotgpu:gcp:RendezvousHost``: the on-demand VM that hosts a gang pool's rendezvous store.

The GCP counterpart of ``spotgpu_pulumi.aws.rendezvous``: a standard (never Spot) VM at a
fixed internal address in the pool's subnetwork, serving ``spotgpu gang store``, and a
firewall rule admitting the store's port only from VMs running as the pool's node service
account. :func:`plan_gcp_rendezvous` decides everything (pure); the component only builds it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_gcp import compute

from spotgpu.bootstrap import render_store_bootstrap
from spotgpu.config import PlanError
from spotgpu.models.base import FieldProblem
from spotgpu.models.gang import GangLaunch
from spotgpu.models.pools import GcpPoolSpec
from spotgpu.models.refs import Ref
from spotgpu_pulumi.gcp.naming import fit
from spotgpu_pulumi.inputs import as_input

TOKEN = "spotgpu:gcp:RendezvousHost"


@dataclass(frozen=True)
class GcpRendezvousPlan:
    name: str  # the VM's name, its network tag (the firewall's target) and the rule's prefix
    project: str
    zone: str
    network: Ref
    subnetwork: Ref
    private_ip: str
    port: int
    machine_type: str
    image: Ref
    startup_script: str
    launch: GangLaunch
    labels: dict[str, str]


def plan_gcp_rendezvous(spec: GcpPoolSpec, prefix: str, labels: dict[str, str]) -> GcpRendezvousPlan | None:
    """The pool's rendezvous host, or None for a pool that runs no gang (nothing changes then)."""
    gang = spec.gang
    if gang is None:
        return None
    host = gang.rendezvous
    zone = host.zone or spec.zones[0]
    if not zone.startswith(f"{spec.region}-"):
        raise PlanError(
            FieldProblem(f"is outside region {spec.region}", at="gang.rendezvous.zone", value=zone,
                         fix=f"use a zone of {spec.region} (the subnetwork's region)"),
            pool=spec.name,
        )
    return GcpRendezvousPlan(
        name=fit(f"{prefix}-rendezvous", 58),
        project=spec.project,
        zone=zone,
        network=spec.network,
        subnetwork=spec.subnetwork,
        private_ip=host.private_ip,
        port=gang.port,
        machine_type=host.machine_type,
        image=host.image,
        startup_script=render_store_bootstrap(gang.port, spec.agent_package),
        launch=gang.launch(spec.name, host.private_ip),
        labels=labels,
    )


class GcpRendezvousHost(pulumi.ComponentResource):
    """A firewall rule (the port from the pool's node service account only) and one standard VM.

    Takes its plan as the AWS and Azure hosts do; ``node_service_account`` (the pool nodes' service
    account, the only source the firewall rule admits) is the one input a plan cannot hold: it is
    an output of the pool's identity."""

    def __init__(self, name: str, plan: GcpRendezvousPlan, node_service_account: pulumi.Input[str],
                 opts: pulumi.ResourceOptions | None = None) -> None:  # fmt: skip
        super().__init__(TOKEN, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        compute.Firewall(
            f"{name}-in",
            project=plan.project,
            name=f"{plan.name}-in",
            network=as_input(plan.network),
            direction="INGRESS",
            description=f"spotgpu gang rendezvous store: tcp {plan.port} from the pool's VMs only",
            allows=[{"protocol": "tcp", "ports": [str(plan.port)]}],
            source_service_accounts=[node_service_account],
            target_tags=[plan.name],
            opts=child,
        )
        instance = compute.Instance(
            f"{name}-host",
            project=plan.project,
            zone=plan.zone,
            name=plan.name,
            machine_type=plan.machine_type,
            boot_disk={"initialize_params": {"image": as_input(plan.image)}},
            network_interfaces=[
                {"network": as_input(plan.network), "subnetwork": as_input(plan.subnetwork), "network_ip": plan.private_ip}
            ],
            scheduling={"provisioning_model": "STANDARD", "preemptible": False, "automatic_restart": True},
            tags=[plan.name],
            metadata={"enable-oslogin": "TRUE"},
            metadata_startup_script=plan.startup_script,
            labels=plan.labels,
            opts=child,
        )
        self.address = pulumi.Output.from_input(plan.private_ip)
        self.instance_name = instance.name
        self.register_outputs({"address": self.address, "instanceName": instance.name})
