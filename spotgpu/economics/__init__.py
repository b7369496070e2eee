"""Cost model, checkpoint interval, deadline risk and the measured profile (no Pulumi import).

The trace replays and the digital twin that test a policy live above it, in
:mod:`spotgpu.simulation`; this package imports neither them nor the controller.
"""
