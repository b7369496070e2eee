"""A pool that runs gang jobs (multi-node torchrun): the launch and its rendezvous host.

Off by default: a pool without ``gang`` renders exactly what it rendered before (same
resources, same user data). With it, the components create a small on-demand host that
serves the rendezvous store (``spotgpu gang store``), open its port to the pool's VMs only,
and give its address to every VM's bootstrap, which starts ``spotgpu-gang.service``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from spotgpu.models.base import SpotModel, fix_hint
from spotgpu.models.refs import REF_SERIALIZER, Ref, ref_check
from spotgpu.models.urls import CommandArgument

IdRef = Annotated[Ref, ref_check(r"^\S+$"), REF_SERIALIZER]
IPV4 = r"^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$"


#: The port the rendezvous host serves torch.distributed's store on, and the components open from the
#: pool's VMs to it (torch's usual one): the gang model's default and ``spotgpu gang store``'s.
DEFAULT_STORE_PORT = 29400
#: Real failures (not 75/76) the launcher rejoins after before it gives up.
DEFAULT_MAX_FAILURES = 3


class GangLaunch(SpotModel):
    """How a pool's VMs launch a gang job: torchrun's flags and the launcher's retry bound."""

    command: list[str] = Field(min_length=1, description="The training command torchrun starts (script and args).")
    min_nodes: int = Field(ge=1, description="--nnodes MIN: the plain manager needs MIN = MAX (same world size).")
    max_nodes: int = Field(ge=1, description="--nnodes MAX.")
    nproc_per_node: int = Field(default=1, ge=1, description="Ranks per VM (one per GPU).")
    rendezvous_host: str = Field(description="The rendezvous host's address (the components' on-demand store host).")
    rendezvous_port: int = Field(default=DEFAULT_STORE_PORT, ge=1, le=65535)
    run_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="The gang's rendezvous id (one per job).")
    join_timeout_seconds: int = Field(default=1800, ge=10, description="How long survivors wait for a replacement.")
    last_call_timeout_seconds: int = Field(default=30, ge=1, description="MIN < MAX: wait this long for more nodes.")
    keep_alive_seconds: int = Field(default=5, ge=1, description="Rendezvous heartbeat interval.")
    monitor_interval_seconds: float = Field(default=0.5, gt=0, le=10)
    max_failures: int = Field(default=DEFAULT_MAX_FAILURES, ge=0, description="Real failures rejoined before giving up.")
    local_addr: str | None = Field(default=None, description="--local-addr (default: the VM's hostname).")

    def model_post_init(self, _context: Any) -> None:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"minNodes {self.min_nodes} > maxNodes {self.max_nodes}; fix: MIN <= MAX")


class AwsRendezvousHostSpec(SpotModel):
    """The on-demand EC2 instance that hosts the gang's rendezvous store."""

    vpc_id: IdRef = Field(json_schema_extra=fix_hint("give the pool's VPC id (vpc-...)"))
    private_ip: str = Field(
        pattern=IPV4,
        description="A fixed private address in the subnet: the VMs' bootstrap names it before the host exists.",
        json_schema_extra=fix_hint("pick a free address inside subnetId's CIDR, e.g. 10.0.1.10"),
    )
    subnet_id: IdRef | None = Field(default=None, description="Default: the pool's first subnet.")
    instance_type: str = Field(default="t3.small", pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
    image_id: IdRef | None = Field(default=None, description="Default: the pool's image.")


class GangSpec(SpotModel):
    """How the pool's VMs launch one gang job (see docs/operations.md, "Gang jobs")."""

    command: list[CommandArgument] = Field(min_length=1, json_schema_extra=fix_hint("the training script and its args"))
    nodes: int = Field(ge=2, json_schema_extra=fix_hint("the gang's VM count (torchrun --nnodes MAX)"))
    min_nodes: int | None = Field(
        default=None, ge=1, description="torchrun --nnodes MIN; default nodes (the plain checkpoint manager needs it)."
    )
    nproc_per_node: int = Field(default=1, ge=1)
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Default: the pool name.")
    port: int = Field(default=DEFAULT_STORE_PORT, ge=1024, le=65535)
    join_timeout_seconds: int = Field(default=1800, ge=60, description="How long survivors wait for a replacement.")
    max_failures: int = Field(default=DEFAULT_MAX_FAILURES, ge=0, description="Real failures rejoined before giving up.")

    def launch(self, pool: str, rendezvous_host: str) -> GangLaunch:
        return GangLaunch(
            command=self.command,
            min_nodes=self.min_nodes or self.nodes,
            max_nodes=self.nodes,
            nproc_per_node=self.nproc_per_node,
            rendezvous_host=rendezvous_host,
            rendezvous_port=self.port,
            run_id=self.run_id or pool,
            join_timeout_seconds=self.join_timeout_seconds,
            max_failures=self.max_failures,
        )


class AwsGangSpec(GangSpec):
    rendezvous: AwsRendezvousHostSpec


class GcpRendezvousHostSpec(SpotModel):
    """The on-demand Compute Engine VM that hosts the gang's rendezvous store."""

    private_ip: str = Field(
        pattern=IPV4,
        description="A fixed internal address in the pool's subnetwork: the VMs' bootstrap names it before the host exists.",
        json_schema_extra=fix_hint("pick a free address inside the subnetwork's range, e.g. 10.128.0.10"),
    )
    zone: str | None = Field(default=None, description="Default: the pool's first zone.")
    machine_type: str = Field(default="e2-small", pattern=r"^[a-z0-9-]+$")
    image: IdRef = Field(
        default="projects/debian-cloud/global/images/family/debian-12",
        description="Any image with python3-venv; the pool's GPU image works too.",
    )


class GcpGangSpec(GangSpec):
    rendezvous: GcpRendezvousHostSpec


class AzureImage(SpotModel):
    """A marketplace image (publisher, offer, sku, version): the pool's VMs' and, by default, the host's."""

    publisher: str = "microsoft-dsvm"
    offer: str = "ubuntu-hpc"
    sku: str = "2204"
    version: str = "latest"


class AzureRendezvousHostSpec(SpotModel):
    """The Regular-priority (never Spot) Azure VM that hosts the gang's rendezvous store."""

    private_ip: str = Field(
        pattern=IPV4,
        description="A fixed private address in the pool's subnet (subnetId): the VMs' bootstrap names it before "
        "the host exists.",
        json_schema_extra=fix_hint(
            "pick a free address inside subnetId's range, e.g. 10.0.0.10 (Azure reserves the first four and the last)"
        ),
    )
    vm_size: str = Field(
        default="Standard_B2s",
        pattern=r"^Standard_[A-Za-z0-9_]+$",
        description="A small general-purpose size: the store needs no GPU.",
        json_schema_extra=fix_hint("use an ARM size name such as Standard_B2s or Standard_D2s_v5"),
    )
    image: AzureImage | None = Field(
        default=None, description="Default: the pool's image (any image with python3-venv works)."
    )
    zone: str | None = Field(
        default=None,
        pattern=r"^[123]$",
        description="Default: the pool's first zone; must be one of the pool's zones.",
        json_schema_extra=fix_hint("use one of the pool's zones as a string, e.g. '1'"),
    )


class AzureGangSpec(GangSpec):
    rendezvous: AzureRendezvousHostSpec
