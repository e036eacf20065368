"""PersistentVolumeClaims of a workload and how its pods mount them.

Differences from upstream, on purpose:

* The HF cache claim exists whenever ``huggingFace.storageSize`` is set; upstream created it
  only with ``preCacheRepos`` but mounted it whenever the size was set, leaving pods pending
  on a claim that never came.
* ``storageClassName`` falls back to ``KaiwoConfig.spec.storage.defaultStorageClass``; when
  both are empty the field is left out so the cluster's default class applies (upstream sent
  ``""``, which means "no class" and only binds pre-provisioned volumes).
"""

from __future__ import annotations

from typing import Any

from kaiwo_planner.domain.children.labels import inherited_labels
from kaiwo_planner.domain.children.naming import child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, StorageInputs
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

DATA_VOLUME = "data"
HF_VOLUME = "hf"


def data_claim_name(workload_name: str) -> str:
    return child_name(workload_name, "data")


def hf_claim_name(workload_name: str) -> str:
    return child_name(workload_name, "hf")


def _claim(
    identity: WorkloadIdentity,
    *,
    name: str,
    size: str,
    storage: StorageInputs,
    defaults: ChildDefaults,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": [storage.access_mode],
        "resources": {"requests": {"storage": size}},
    }
    storage_class = storage.storage_class or defaults.default_storage_class
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": child_metadata(identity, name=name, labels=inherited_labels({}, identity)),
        "spec": spec,
    }


def persistent_volume_claims(
    identity: WorkloadIdentity, storage: StorageInputs | None, defaults: ChildDefaults
) -> list[dict[str, Any]]:
    """The data claim ``<name>-data`` and the HF cache claim ``<name>-hf``, when sized."""
    if storage is None:
        return []
    claims = []
    if storage.has_data:
        claims.append(
            _claim(
                identity,
                name=data_claim_name(identity.name),
                size=storage.data_size,
                storage=storage,
                defaults=defaults,
            )
        )
    if storage.has_hf:
        claims.append(
            _claim(
                identity,
                name=hf_claim_name(identity.name),
                size=storage.hf_size,
                storage=storage,
                defaults=defaults,
            )
        )
    return claims


def storage_volumes(workload_name: str, storage: StorageInputs | None) -> list[dict[str, Any]]:
    """Pod volumes for the workload's claims."""
    if storage is None:
        return []
    volumes = []
    if storage.has_data:
        claim = {"claimName": data_claim_name(workload_name)}
        volumes.append({"name": DATA_VOLUME, "persistentVolumeClaim": claim})
    if storage.has_hf:
        claim = {"claimName": hf_claim_name(workload_name)}
        volumes.append({"name": HF_VOLUME, "persistentVolumeClaim": claim})
    return volumes


def storage_mounts(storage: StorageInputs | None) -> list[dict[str, Any]]:
    """Container mounts: data at ``data.mountPath``, the HF cache at ``huggingFace.mountPath``."""
    if storage is None:
        return []
    mounts = []
    if storage.has_data:
        mounts.append({"name": DATA_VOLUME, "mountPath": storage.data_mount_path})
    if storage.has_hf:
        mounts.append({"name": HF_VOLUME, "mountPath": storage.hf_mount_path})
    return mounts


def storage_env(storage: StorageInputs | None) -> list[dict[str, Any]]:
    """``HF_HOME`` pointing at the HF cache, when there is one."""
    if storage is None or not storage.has_hf:
        return []
    return [{"name": "HF_HOME", "value": storage.hf_mount_path}]
