"""Boot data is readable: no credentials in the user data or instance metadata of any VM.

An AWS launch template's ``userData`` is base64, not encryption; a GCP instance template's
``metadata`` is plain text; Azure ``customData``/``userData`` likewise. Every process on the VM,
and everyone who may describe the template, reads them, and they sit in Pulumi state. A URL with
user info in it (``https://deploy:TOKEN@artifacts.example.com/...``, a pip index, a store) puts the
token there. The components refuse such a value at the config edge
(:mod:`spotgpu.models.urls`); this rule judges what any program made, raw resources included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import EnforcementLevel

from spotgpu.models.urls import URL_USERINFO, credentials_in, redact
from spotgpu_guard.catalog import Catalog
from spotgpu_guard.rule import Finding, stack_rule
from spotgpu_guard.values import decode_bootstrap

#: Properties that hold what a VM reads at boot (any cloud): user data, custom data, metadata.
BOOT_KEYS = ("userData", "userDataBase64", "customData", "metadata", "metadataStartupScript", "startupScript")
FIX = ("fix: take the secret out of the boot data: the VM's own identity (instance role, service account, managed "
       "identity) for stores and registries, a pip index with a keyring for packages, a secret manager read at boot "
       "for anything else; a spotgpu pool renders none (agentPackage and controller.image refuse credentials)")  # fmt: skip


def _boot_texts(node: Any, at: str, inside: bool = False) -> Iterator[tuple[str, str]]:
    """(property path, decoded text) of every boot-data string under ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _boot_texts(value, f"{at}.{key}" if at else str(key), inside or key in BOOT_KEYS)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _boot_texts(value, f"{at}[{i}]", inside)
    elif inside and isinstance(node, str):
        text = decode_bootstrap(node)
        yield at, text if isinstance(text, str) else node


def _first_url(text: str) -> str:
    """The first URL with credentials, redacted, as a message shows it."""
    match = URL_USERINFO.search(text)
    start = match.start() if match else 0
    end = next((i for i in range(start, len(text)) if text[i].isspace() or text[i] in "'\"`"), len(text))
    shown = redact(text[start:end])
    return shown if len(shown) <= 90 else shown[:87] + "..."


def check_boot_data(catalog: Catalog, _config: Mapping[str, Any]) -> Iterator[Finding]:
    for res in catalog.inv.resources:
        for at, text in _boot_texts(res.props, ""):
            if credentials_in(text):
                yield Finding(res.urn, f"{res.label()} {at} carries a URL with credentials ({_first_url(text)}), "
                              f"readable by every process on the VM and everyone who may read the template; {FIX}")  # fmt: skip
                break


RULES = [
    stack_rule(
        "boot-data-has-no-credentials",
        "No VM's user data, custom data or instance metadata carries a URL with credentials (user:password@).",
        EnforcementLevel.MANDATORY,
        check_boot_data,
        remediation="Give the VM its access through its own identity, a keyring or a secret manager, not its boot data",
    ),
]
