"""What a gang's VMs and its rendezvous host agree on without importing each other."""

from __future__ import annotations

#: The port the rendezvous host serves torch.distributed's store on, and the components open from the
#: pool's VMs to it (torch's usual one): the gang model's default and ``spotgpu gang store``'s.
DEFAULT_STORE_PORT = 29400
