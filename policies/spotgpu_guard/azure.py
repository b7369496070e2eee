"""Azure: Spot scale sets and VMs on GPU sizes; storage accounts as checkpoint stores."""

from __future__ import annotations

from typing import Any

from spotgpu.models.notice import AzureNoticeContract
from spotgpu_guard.inventory import Inventory, Res, names_of
from spotgpu_guard.links import ROLE, links_of
from spotgpu_guard.model import Bootstrap, Gap, Group, SpotPool, Store
from spotgpu_guard.values import UNKNOWN, as_list, decode_bootstrap

SCALE_SET = "azure-native:compute:VirtualMachineScaleSet"
VM = "azure-native:compute:VirtualMachine"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
_TLS_OK = ("TLS1_2", "TLS1_3")


def _is_gpu_size(size: Any) -> Any:
    if size is UNKNOWN:
        return UNKNOWN
    return isinstance(size, str) and size.lower().startswith("standard_n")


def _spot(priority: Any) -> Any:
    return UNKNOWN if priority is UNKNOWN else priority in ("Spot", "Low")


def _bootstraps(res: Res, profile: tuple[str, ...]) -> list[Bootstrap]:
    custom = res.get(*profile, "osProfile", "customData")
    user = res.get(*profile, "userData")
    where = ".".join((*profile, "osProfile.customData")) if profile else "osProfile.customData"
    found = [Bootstrap(f"{res.label()} {where}", decode_bootstrap(custom))]
    if user is not None:
        found.append(Bootstrap(f"{res.label()} {'.'.join((*profile, 'userData'))}", decode_bootstrap(user)))
    return found


def _pool(res: Res, kind: str, size: Any, spot: Any, profile: tuple[str, ...]) -> SpotPool:
    caveats = [c for c, bad in (("priority unknown until apply; judged as Spot", spot is UNKNOWN),
                                ("size unknown until apply; judged as GPU", size is UNKNOWN)) if bad]
    zones = {z for z in as_list(res.get("zones")) if isinstance(z, str)}
    return SpotPool(res, "azure", kind, links_of(res), {size} if isinstance(size, str) else set(), zones,
                    bootstraps=_bootstraps(res, profile), contract=AzureNoticeContract(), caveat="; ".join(caveats))


def spot_pools(inv: Inventory) -> list[SpotPool]:
    pools = []
    for vmss in inv.of_type(SCALE_SET):
        size, spot = vmss.get("sku", "name"), _spot(vmss.get("virtualMachineProfile", "priority"))
        if spot is not False and _is_gpu_size(size) is not False:
            pools.append(_pool(vmss, "Spot scale set", size, spot, ("virtualMachineProfile",)))
    for vm in inv.of_type(VM):
        size, spot = vm.get("hardwareProfile", "vmSize"), _spot(vm.get("priority"))
        if spot is not False and _is_gpu_size(size) is not False:
            pools.append(_pool(vm, "Spot VM", size, spot, ()))
    return pools


def fallback_groups(inv: Inventory) -> list[Group]:
    out = []
    for vmss in inv.of_type(SCALE_SET):
        spot = _spot(vmss.get("virtualMachineProfile", "priority"))
        out.append(Group(vmss, "azure", "scale set", names_of(vmss), None if spot is UNKNOWN else not spot,
                         "its priority is Spot" if spot is True else ""))
    return out


def _account_gaps(inv: Inventory, account: Res, names: set[str]) -> list[Gap]:
    gaps = []
    tls = account.get("minimumTlsVersion")
    checks = (
        (account.get("enableHttpsTrafficOnly") is True,
         "HTTPS-only is not set; fix: set enable_https_traffic_only=True"),
        (tls in _TLS_OK, f"minimumTlsVersion is {tls!r}; fix: set minimum_tls_version='TLS1_2'"),
        (account.get("allowBlobPublicAccess") is False,
         "anonymous blob access is not disabled; fix: set allow_blob_public_access=False"),
        (account.get("allowSharedKeyAccess") is False,
         "shared-key access is allowed, so a leaked key bypasses Entra ID; fix: set allow_shared_key_access=False "
         "and grant the pool's managed identity Storage Blob Data Contributor"),
    )
    gaps = [Gap(m) for ok, m in checks if not ok]
    services = inv.companions(account, [BLOB_SERVICE], "accountName", target_names=names)
    if not any(s.get("isVersioningEnabled") is True for s in services):
        gaps.append(Gap("blob versioning is not enabled; fix: add azure_native.storage.BlobServiceProperties("
                        f"account_name={account.name}.name, blob_services_name='default', is_versioning_enabled=True)"))
    return gaps


def stores(inv: Inventory) -> list[Store]:
    out = []
    for account in inv.of_type(STORAGE_ACCOUNT):
        names = names_of(account)
        out.append(Store(account, "azure", "storage account", names, _account_gaps(inv, account, names),
                         links_of(account).get(ROLE) == "checkpoint-store"))
    return out
