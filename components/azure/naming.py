"""Deterministic Azure names: pure functions, so tags can carry them as plain strings.

Every name is derived from stable keys (pool, environment, VM size), never from
a list position or a random suffix: the link tags the policy pack reads
(``spotgpu-fallback-group``, ``spotgpu-checkpoint-store``) must name a resource
before it exists, and renaming a Pulumi child would replace a live scale set.

Limits used (Microsoft "Naming rules and restrictions for Azure resources" and
"names and instance IDs for scale set VMs"):

* scale set: 1-64 chars; but a Flexible member VM is named
  ``{scale-set-name}_{8-char-guid}`` and a Linux VM name is at most 64 chars, so
  scale set names are kept to :data:`MAX_SCALE_SET_NAME` (55);
* ``computerNamePrefix``: 1-15 chars;
* user-assigned identity: 3-128 chars, alphanumerics, '-' and '_', starting alphanumeric;
* blob container: 3-63 chars, lowercase letters, digits and single dashes;
* storage account: 3-24 lowercase letters and digits, globally unique, no reserved words.
"""

from __future__ import annotations

import hashlib
import re
import uuid

from spotgpu.models.base import FieldProblem
from spotgpu.models.refs import Ref, is_deferred
from spotgpu_pulumi.planning import store_url

MAX_SCALE_SET_NAME = 64 - len("_12345678")
MAX_COMPUTER_NAME_PREFIX = 15
CHECKPOINT_CONTAINER = "checkpoints"

#: Names namespace for role-assignment / role-definition GUIDs (uuid5 of stable keys).
SPOTGPU_NAMESPACE = uuid.UUID("5b0f3c1e-8d5a-4f3e-9c8e-2f6a1d7b9e40")
#: Stands in for a resource group given as an Output in GUID keys: its name is not known when the
#: pool is planned, and a GUID must be. '<' and '>' cannot occur in a resource group name, so this
#: key never equals a plain name's.
DEFERRED_RESOURCE_GROUP_KEY = "<resource group output>"

_SIZE = re.compile(r"^Standard_([A-Z]+)([0-9]+)([a-z]*)((?:_[A-Za-z0-9]+)*)$")
#: Whole-name reserved words (ARM "ReservedResourceName"), compared case-insensitively.
RESERVED_WORDS = frozenset(
    [
        "access",
        "app_code",
        "app_themes",
        "app_data",
        "app_globalresources",
        "app_localresources",
        "app_webreferences",
        "app_browsers",
        "azure",
        "bing",
        "bizspark",
        "biztalk",
        "cortana",
        "directx",
        "dotnet",
        "dynamics",
        "excel",
        "exchange",
        "forefront",
        "groove",
        "hololens",
        "hyperv",
        "kinect",
        "lync",
        "msdn",
        "o365",
        "office",
        "office365",
        "onedrive",
        "onenote",
        "outlook",
        "powerpoint",
        "sharepoint",
        "skype",
        "visio",
        "visualstudio",
        "web.config",
        "xbox",
    ]
)
#: Words ARM rejects anywhere in a name.
RESERVED_SUBSTRINGS = ("microsoft", "windows")
#: Word ARM rejects at the start of a name.
RESERVED_PREFIXES = ("login",)


def _digest(*keys: str, length: int = 6) -> str:
    return hashlib.sha256("|".join(keys).encode()).hexdigest()[:length]


def size_key(vm_size: str) -> str:
    """``Standard_NC24ads_A100_v4`` -> ``nc24ads-a100-v4``: the stable key of one scale set."""
    if not _SIZE.match(vm_size):  # the planner refuses such a size first, naming its key
        raise ValueError(f"{vm_size!r} is not an Azure size name such as Standard_NC24ads_A100_v4")
    return vm_size[len("Standard_") :].lower().replace("_", "-")


def _fit(name: str, limit: int, *keys: str) -> str:
    """``name`` if it fits, else a cut name ending in a hash of the full one (still unique)."""
    if len(name) <= limit:
        return name
    tail = _digest(name, *keys)
    return name[: limit - len(tail) - 1].rstrip("-") + "-" + tail


def scale_set_name(pool: str, environment: str, vm_size: str) -> str:
    """Name of the pool's spot scale set for one GPU size, e.g. ``train-az-prod-nc24ads-a100-v4``."""
    return _fit(f"{pool}-{environment}-{size_key(vm_size)}", MAX_SCALE_SET_NAME)


def fallback_scale_set_name(pool: str, environment: str) -> str:
    """Name of the pool's on-demand fallback scale set, e.g. ``train-az-prod-ondemand``."""
    return _fit(f"{pool}-{environment}-ondemand", MAX_SCALE_SET_NAME)


def computer_name_prefix(pool: str, vm_size: str, capacity_type: str) -> str:
    """Hostname prefix (<= 15 chars): pool letters, ``s``/``o`` for spot/on-demand, a size hash.

    Hostnames show up in logs and ``nvidia-smi`` output, so the pool stays readable;
    the hash keeps two sizes of one pool apart.
    """
    letters = re.sub(r"[^a-z0-9]", "", pool.lower())
    kind = "s" if capacity_type == "spot" else "o"
    tail = kind + _digest(vm_size, length=4)
    prefix = letters[: MAX_COMPUTER_NAME_PREFIX - len(tail)] + tail
    if not prefix[0].isalpha():  # pool names start with a letter; guard anyway
        prefix = "v" + prefix[: MAX_COMPUTER_NAME_PREFIX - 1]
    return prefix


#: The rendezvous host's VM and computer name (Linux: 64), leaving room for the ``-nic``/``-nsg``/``-pool`` names.
MAX_RENDEZVOUS_NAME = 64 - len("-pool")


def rendezvous_name(pool: str, environment: str) -> str:
    """Name of a gang pool's rendezvous host VM (and its hostname), e.g. ``train-az-prod-rendezvous``."""
    return _fit(f"{pool}-{environment}-rendezvous", MAX_RENDEZVOUS_NAME)


def identity_name(pool: str, environment: str, role: str) -> str:
    """User-assigned identity name, e.g. ``train-az-prod-pool`` or ``train-az-prod-controller``."""
    return _fit(f"{pool}-{environment}-{role}", 128)


def checkpoint_store_url(account: str, container: str, prefix: str) -> str:
    """``az://account/container/prefix``: the form the checkpoint library and the tags use."""
    return store_url("az", container, prefix, account=account)


def storage_account_problem(name: str) -> FieldProblem | None:
    """Why ARM would refuse ``name`` as a storage account (at ``storageAccountName``), or None.

    The pool's and the standalone store's models check the alphabet and length; the reserved words
    ARM refuses (``ReservedResourceName``) are known only here.
    """
    if not re.fullmatch(r"[a-z0-9]{3,24}", name):
        return FieldProblem("must be 3-24 lowercase letters and digits", at="storageAccountName", value=name,
                            fix="remove dashes, underscores and capitals")
    lowered = name.lower()
    hits = [w for w in RESERVED_SUBSTRINGS if w in lowered]
    if lowered in RESERVED_WORDS:
        hits.append(lowered)
    hits += [w for w in RESERVED_PREFIXES if lowered.startswith(w)]
    if hits:
        return FieldProblem(f"contains the reserved word {hits[0]!r} (ARM ReservedResourceName)",
                            at="storageAccountName", value=name,
                            fix="choose a name without it, e.g. add your team or project")
    return None


def container_resource_id(subscription_id: str, resource_group: str, account: str, container: str) -> str:
    """ARM id of a blob container: the narrowest scope a data-plane role can be granted on."""
    return (
        f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Storage"
        f"/storageAccounts/{account}/blobServices/default/containers/{container}"
    )


#: The Storage queue, in the pool's own account, that Event Grid delivers the pool's Scheduled Events to.
EVENTS_QUEUE = "scheduled-events"


def events_queue_url(account: str, queue: str = EVENTS_QUEUE) -> str:
    """The queue's URL, the form the controller's ``eventsQueueUrl`` takes."""
    return f"https://{account}.queue.core.windows.net/{queue}"


def queue_resource_id(subscription_id: str, resource_group: str, account: str, queue: str) -> str:
    """ARM id of a storage queue: the narrowest scope a queue data role can be granted on."""
    return (
        f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Storage"
        f"/storageAccounts/{account}/queueServices/default/queues/{queue}"
    )


def events_names(pool: str, environment: str) -> tuple[str, str]:
    """(system topic, event subscription) names: 3-128 and 3-64 letters, digits and '-'."""
    return _fit(f"{pool}-{environment}-scheduled-events", 128), _fit(f"{pool}-{environment}-to-queue", 64)


def scale_set_resource_id(subscription_id: str, resource_group: str, name: str) -> str:
    return (
        f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers"
        f"/Microsoft.Compute/virtualMachineScaleSets/{name}"
    )


def resource_group_id(subscription_id: str, resource_group: str) -> str:
    return f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}"


def resource_group_key(resource_group: Ref) -> str:
    """The resource group as a GUID key: its name, or :data:`DEFERRED_RESOURCE_GROUP_KEY` for an Output.

    A plain name keeps every GUID exactly as before. For an Output the GUIDs stay
    unique, because their keys also hold the globally unique storage account name;
    switching a stack between the two changes the GUIDs, so Pulumi replaces the
    role assignments and custom role definitions named by them (docs/azure.md).
    """
    return DEFERRED_RESOURCE_GROUP_KEY if is_deferred(resource_group) else str(resource_group)


def stable_guid(*keys: str) -> str:
    """A GUID that is the same on every run for the same keys (role assignment / definition names).

    Callers include the storage account name, which is globally unique, so two
    stacks never derive the same GUID.
    """
    return str(uuid.uuid5(SPOTGPU_NAMESPACE, "|".join(keys)))
