"""Framework callbacks: ``spotgpu.integrations.hf`` (``spotgpu[hf]``) and
``spotgpu.integrations.lightning`` (``spotgpu[lightning]``); see docs/integrations.md.

Nothing is imported here, so ``import spotgpu.integrations`` works without either framework.
"""
