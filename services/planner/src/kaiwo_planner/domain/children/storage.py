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

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kaiwo_planner.domain.children.labels import inherited_labels
from kaiwo_planner.domain.children.naming import child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, StorageInputs
from kaiwo_planner.domain.state.nodes import parse_quantity
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


@dataclass(frozen=True, slots=True)
class ClaimUpdate:
    """The manifest to apply to an existing claim, and the desired changes it leaves out."""

    manifest: dict[str, Any]
    not_applied: tuple[str, ...]

    def note(self) -> str | None:
        """What a Warning Event tells the user, or None when everything applies."""
        if not self.not_applied:
            return None
        return (
            f"Not applied to the existing claim {self.manifest['metadata']['name']}, because a "
            "claim's access modes and storage class cannot change after it is created, nor can "
            f"its size shrink: {', '.join(self.not_applied)}. Delete and re-create the "
            "workload to use them."
        )


def claim_update(desired: dict[str, Any], observed: Mapping[str, Any]) -> ClaimUpdate:
    """The part of ``desired`` (a claim of :func:`persistent_volume_claims`) that the API
    server accepts for the ``observed`` claim.

    After creation a claim's spec may change only in its requested size, and only upwards
    (a bound claim whose class allows expansion; the API server says so when it does not).
    An edited ``storageClassName`` or ``accessMode``, a smaller size, or a new
    ``KaiwoConfig`` default class would otherwise be refused on every plan: the observed
    values are kept instead, and named. A class the cluster filled in (the desired claim
    names none) is left to the cluster, so a new claim costs no second apply.
    """
    spec = dict(desired["spec"])
    observed_spec = observed.get("spec")
    if not isinstance(observed_spec, Mapping):
        return ClaimUpdate(manifest=desired, not_applied=())
    not_applied: list[str] = []
    for field_name in ("accessModes", "storageClassName"):
        kept = observed_spec.get(field_name)
        if field_name in spec and kept is not None and kept != spec[field_name]:
            spec[field_name] = kept
            not_applied.append(f"spec.{field_name}")
    kept_size = _requested_size(observed_spec)
    wanted_size = _requested_size(spec)
    if kept_size is not None and wanted_size is not None and wanted_size < kept_size:
        spec["resources"] = {
            "requests": {"storage": observed_spec["resources"]["requests"]["storage"]}
        }
        not_applied.append("spec.resources.requests.storage")
    if not not_applied:
        return ClaimUpdate(manifest=desired, not_applied=())
    return ClaimUpdate(manifest={**desired, "spec": spec}, not_applied=tuple(not_applied))


def _requested_size(spec: Mapping[str, Any]) -> Decimal | None:
    resources = spec.get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    size = requests.get("storage") if isinstance(requests, Mapping) else None
    try:
        return parse_quantity(size) if isinstance(size, str | int | float) else None
    except ValueError:
        return None


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
