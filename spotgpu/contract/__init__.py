"""What the parts that run apart agree on, in one place every part may import.

The node agent, the controller, the simulations and the components talk through the pool's
object store, not through each other: the JSON state store (:mod:`spotgpu.contract.state_store`:
the controller's record, leases, drain requests and agent commits, conditional writes) and the
drain/scheduler channel on top of it (:mod:`spotgpu.contract.drain`: which key means what).
This package imports no part (agent, controller, economics, components); it stands on the storage
layer (:mod:`spotgpu.storage`) that the checkpoint library writes through too: the state store is a
JSON codec over its ``Store``, and the store URL forms (:mod:`spotgpu.storage.urls`) are its one
parser. ``tests/foundation/test_layers.py`` fails on an import that points the wrong way.
"""
