"""Which of the third-party APIs the operator drives a real cluster lacks, said by ``kaiwo up``.

``kaiwo up`` runs against whatever cluster the kubeconfig names. Without Kueue every KaiwoJob
and KaiwoService still gets its child, suspended, and waits in PENDING for an admission no one
gives, and the KaiwoQueueConfig's status can only say that its ClusterQueues are not served
(decision 0265). So the start-up table names each missing API and what waits on it (decision
0262). The components'
CRDs are read, not their objects: listing every RayJob of a large cluster to learn that the
kind exists would cost more than the whole start-up.

:func:`missing_prerequisites` and :func:`prerequisites_note` are pure;
:func:`read_missing_prerequisites` reads the CRDs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_kube import KubeError, NotFound, resources
from kaiwo_kube.port import ObjectGetter
from kaiwo_kube.resources import ResourceType


@dataclass(frozen=True, slots=True)
class Prerequisite:
    component: str
    resource: ResourceType
    """A kind the operator writes or reads, standing for its component's API."""
    without: str
    """What a user meets while the API is not served."""

    @property
    def crd_name(self) -> str:
        return f"{self.resource.plural}.{self.resource.group}"


PREREQUISITES: Final = (
    Prerequisite(
        "Kueue",
        resources.KUEUE_WORKLOAD,
        "every KaiwoJob and KaiwoService waits in PENDING, and the KaiwoQueueConfig makes "
        "no queues",
    ),
    Prerequisite("KubeRay", resources.RAY_JOB, "Ray KaiwoJobs and KaiwoServices never start"),
    Prerequisite("AppWrapper", resources.APP_WRAPPER, "Ray KaiwoServices never start"),
)


def serves(crd: Mapping[str, Any] | None, version: str) -> bool:
    """Whether ``crd`` (None: not installed) serves ``version``."""
    if crd is None:
        return False
    versions = (crd.get("spec") or {}).get("versions") or ()
    return any(v.get("name") == version and v.get("served") is True for v in versions)


def missing_prerequisites(
    crds: Mapping[str, Mapping[str, Any] | None],
) -> tuple[Prerequisite, ...]:
    """The prerequisites whose API is not served, from each one's CRD by name (None: not
    installed)."""
    return tuple(
        prerequisite
        for prerequisite in PREREQUISITES
        if not serves(crds.get(prerequisite.crd_name), prerequisite.resource.version)
    )


def prerequisites_note(missing: tuple[Prerequisite, ...] | None) -> str:
    """The start-up table's line; ``missing`` None when the CRDs could not be read."""
    if missing is None:
        return "not checked: the CustomResourceDefinitions could not be read"
    if not missing:
        return ", ".join(p.component for p in PREREQUISITES) + " served"
    named = "; ".join(
        f"{p.component} ({p.resource.api_version} {p.resource.kind}): {p.without}" for p in missing
    )
    return (
        f"NOT SERVED: {named}. Install what is missing: docs/operations.md, What the cluster needs"
    )


async def read_missing_prerequisites(kube: ObjectGetter) -> tuple[Prerequisite, ...] | None:
    """:func:`missing_prerequisites` of the cluster ``kube`` talks to; None when its CRDs
    cannot be read (credentials that may not)."""
    found: dict[str, Mapping[str, Any] | None] = {}
    for prerequisite in PREREQUISITES:
        name = prerequisite.crd_name
        try:
            found[name] = await kube.get(resources.CUSTOM_RESOURCE_DEFINITION, name)
        except NotFound:
            found[name] = None
        except KubeError:
            # Refused (403) or failing: a note that cannot be made stops no start-up.
            return None
    return missing_prerequisites(found)
