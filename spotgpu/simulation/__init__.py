"""Simulations of the whole system on availability traces: what a policy costs before it runs.

* the digital twin (:mod:`~spotgpu.simulation.twin`): the controller's own planner against a
  simulated cloud (:mod:`~spotgpu.simulation.cloud`) running a simulated job and its agents
  (:mod:`~spotgpu.simulation.job`), talking through the same channel a real pool uses;
  :mod:`~spotgpu.simulation.ladder` runs it over a batch of jobs;
* the baselines (:mod:`~spotgpu.simulation.baselines`) replayed vectorised
  (:mod:`~spotgpu.simulation.replay`), side by side with the twin (:mod:`~spotgpu.simulation.compare`);
* ``spotgpu simulate`` (:mod:`~spotgpu.simulation.cli`), a stack's pool mapped onto traced zones
  (:mod:`spotgpu.economics.topology`, which the trace fit reads too).

This package imports the controller and the economics; neither imports it
(``tests/foundation/test_layers.py``).
"""
