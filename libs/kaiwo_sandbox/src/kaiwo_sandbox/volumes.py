"""The simulated volume provisioner: every PersistentVolumeClaim is Bound, with the capacity it
asked for; nothing is stored.

On the fake, which has no volume controller, the claim's status is written directly. On a real
API server the volume controller would write Pending back, so there the sandbox provisions a
PersistentVolume reserved for the claim (``claimRef``) and lets that controller bind the two.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final

from kaiwo_kube import AlreadyExists, Conflict, NotFound, resources
from kaiwo_kube.resources import ResourceType

from kaiwo_sandbox.cluster_port import SandboxCluster

FIELD_MANAGER: Final = "persistentvolume-binder-sandbox"
PERSISTENT_VOLUME: Final = ResourceType(
    group="", version="v1", plural="persistentvolumes", kind="PersistentVolume", namespaced=False
)


def bound_status(claim: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status that binds ``claim``, or None when it is bound already."""
    if (claim.get("status") or {}).get("phase") == "Bound":
        return None
    spec = claim.get("spec") or {}
    return {
        "phase": "Bound",
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "capacity": {"storage": _storage(claim)},
    }


def volume_for(claim: Mapping[str, Any]) -> dict[str, Any]:
    """A PersistentVolume reserved for ``claim`` (a host path that is never written)."""
    metadata, spec = claim["metadata"], claim.get("spec") or {}
    name = f"sandbox-{metadata['uid']}"
    volume: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"sandbox.kaiwo.silogen.ai/simulated": "true"}},
        "spec": {
            "capacity": {"storage": _storage(claim)},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            # Retain: no simulated node has the path, so nothing could delete it.
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/var/lib/kaiwo-sandbox/{name}"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": metadata["namespace"],
                "name": metadata["name"],
                "uid": metadata["uid"],
            },
        },
    }
    if spec.get("storageClassName"):
        volume["spec"]["storageClassName"] = spec["storageClassName"]
    if spec.get("volumeMode"):
        volume["spec"]["volumeMode"] = spec["volumeMode"]
    return volume


def _storage(claim: Mapping[str, Any]) -> str:
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    return str(requests.get("storage", "1Gi"))


class VolumeBinder:
    def __init__(self, kube: SandboxCluster, *, provision: bool) -> None:
        self.kube = kube
        self.provision = provision

    async def reconcile(self) -> None:
        for claim in (await self.kube.list(resources.PERSISTENT_VOLUME_CLAIM)).items:
            status = bound_status(claim)
            if status is None or claim["metadata"].get("deletionTimestamp"):
                continue
            if self.provision:
                with contextlib.suppress(AlreadyExists):
                    await self.kube.create(volume_for(claim), field_manager=FIELD_MANAGER)
                continue
            with contextlib.suppress(NotFound, Conflict):
                await self.kube.patch_status(
                    resources.PERSISTENT_VOLUME_CLAIM,
                    claim["metadata"]["name"],
                    status,
                    namespace=claim["metadata"]["namespace"],
                    field_manager=FIELD_MANAGER,
                    method="merge",
                )
