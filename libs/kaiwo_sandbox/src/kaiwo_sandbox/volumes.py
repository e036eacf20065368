"""The simulated volume provisioner: every PersistentVolumeClaim is Bound at once, with the
capacity it asked for (no PersistentVolume is made; nothing is stored)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final

from kaiwo_kube import Conflict, KubernetesPort, NotFound, resources

FIELD_MANAGER: Final = "persistentvolume-binder-sandbox"


def bound_status(claim: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status that binds ``claim``, or None when it is bound already."""
    if (claim.get("status") or {}).get("phase") == "Bound":
        return None
    spec = claim.get("spec") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "phase": "Bound",
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "capacity": {"storage": storage},
    }


class VolumeBinder:
    def __init__(self, kube: KubernetesPort) -> None:
        self.kube = kube

    async def reconcile(self) -> None:
        for claim in (await self.kube.list(resources.PERSISTENT_VOLUME_CLAIM)).items:
            status = bound_status(claim)
            if status is None:
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
