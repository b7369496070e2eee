"""Run a Pulumi Python program offline under Pulumi's own mock runtime.

Used by ``spotgpu preview`` and by the component tests: no CLI, no provider
plugins, no credentials, no network.
"""
