"""What the parts that run apart agree on, in one place every part may import.

The node agent, the controller, the simulations and the components talk through the pool's
object store, not through each other: the JSON state store (:mod:`spotgpu.contract.state_store`:
the controller's record, leases, drain requests and agent commits, conditional writes) and the
drain/scheduler channel on top of it (:mod:`spotgpu.contract.drain`: which key means what).
This package imports no part (agent, controller, economics, components); the store URL forms
come from the checkpoint library's one parser (:func:`spotgpu.checkpoint.store.parse_store_url`).
``tests/foundation/test_layers.py`` fails on an import that points the wrong way.
"""
