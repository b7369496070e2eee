"""Every agreement between the parts that run apart, each written once as a typed value.

The node agent, the workload, the controller, the fleet's readers, the components and the policy
pack never import each other to agree: they import what they agree on from here.

* :mod:`~spotgpu.contract.notice`: what the agent tells the workload about a notice (the served
  document, its budget, the hook environment);
* :mod:`~spotgpu.contract.checkpoint_report`: what the workload reports back (``POST /v1/report``:
  the body, its kinds, gang roles and outcomes, restore sources);
* :mod:`~spotgpu.contract.throughput`: the workload's step time (``POST /v1/throughput``: the body,
  its rules written once for the client's arguments and the agent's read);
* :mod:`~spotgpu.contract.agent_status`: what the agent serves about itself (``GET /v1/notice``,
  ``GET /v1/status``);
* :mod:`~spotgpu.contract.telemetry`, :mod:`~spotgpu.contract.agent_records`,
  :mod:`~spotgpu.contract.controller_events`: the telemetry both producers write and the fleet's
  readers read (record and event kinds, their fields, failure reasons, the schema version);
* :mod:`~spotgpu.contract.tags`: the link tags a pool's resources carry for the policy pack,
  the agent and the controller;
* :mod:`~spotgpu.contract.interruptions`, :mod:`~spotgpu.contract.sources`,
  :mod:`~spotgpu.contract.times`: what an interruption is called, which cloud events carry one,
  how their times read;
* :mod:`~spotgpu.contract.state_store`, :mod:`~spotgpu.contract.drain`: the controller's record,
  leases, drain requests and agent commits in the pool's object store (conditional writes over
  the storage layer's ``Store``, :mod:`spotgpu.storage`).

The documents read their JSON fields through :mod:`~spotgpu.contract.fields`: one reader per JSON
type, one error line (``{what}.{key}: not {wanted} (value: {value!r})``).

This package imports no part (agent, controller, economics, components); below it are only the
models, the catalogue and the storage layer. ``tests/foundation/test_layers.py`` fails on an
import that points the wrong way; ``tests/foundation/test_contract.py`` round-trips every record
kind the producers build.
"""
