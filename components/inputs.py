"""Config ids that may be Outputs, handed to providers as ``pulumi.Input[str]``.

``spotgpu.models`` cannot name pulumi types, so an id of existing
infrastructure is typed :data:`spotgpu.models.refs.Ref` (a str, or a deferred
value such as an ``Output`` from another resource or a ``StackReference``).
Here it becomes what the provider arguments are typed with; nothing is
resolved, so the resource graph stays static.
"""

from __future__ import annotations

from typing import cast

import pulumi

from spotgpu.models.refs import Ref


def as_input(value: Ref) -> pulumi.Input[str]:
    """A config id as a provider input (a plain str, or the Output it already is)."""
    return cast(pulumi.Input[str], value)


def optional_input(value: Ref | None) -> pulumi.Input[str] | None:
    return None if value is None else as_input(value)


def as_output(value: Ref | None) -> pulumi.Output[str]:
    """The id as an Output ("" when unset), to join with other Outputs in ``Output.all``."""
    return pulumi.Output.from_input(as_input(value) if value is not None else "")
