"""The owner kinds whose plans the executor carries out, and what each may write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kaiwo_contracts.plans import ObjectRef

KAIWO_API: Final = "kaiwo.silogen.ai/v1alpha1"
KUBEAI_API: Final = "kubeai.org/v1"
RBAC_API: Final = "rbac.authorization.k8s.io/v1"
CACHE_EVICTION_FINALIZER: Final = "kubeai.org/cache-eviction"
MODEL_FEATURE_LABEL_PREFIX: Final = "features.kubeai.org/"
"""A Model carries ``features.kubeai.org/<feature>: "true"`` for each of its
``spec.features`` (upstream's contract: ``kubectl get models -l ...`` finds them)."""
CONFIG_API: Final = "config.kaiwo.silogen.ai/v1alpha1"
KUEUE_API: Final = "kueue.x-k8s.io/v1beta1"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
OWNER_UID_LABEL: Final = "kaiwo.silogen.ai/owner-uid"
QUEUE_CONFIG_LABEL: Final = "kaiwo.silogen.ai/queue-config"
SINGLETON: Final = "kaiwo"
KAIWO_NODE_LABEL_PREFIX: Final = "kaiwo/"
DEFAULT_GPU_TAINT_KEY: Final = "kaiwo.silogen.ai/gpu"
GPU_TAINT_VALUE: Final = "true"
GPU_TAINT_EFFECT: Final = "NoSchedule"
"""The GPU taint the operator puts on GPU nodes is ``<defaultGpuTaintKey>=true:NoSchedule``."""
GPU_TAINT_RECORD_ANNOTATION: Final = "kaiwo/gpu-taint"
"""On a Node: the key of the GPU taint the operator itself added there (decision 0145). Only
the operator's field manager writes it, in the same patch that adds the taint; it is what lets
the executor remove that taint, and no other, when ``defaultGpuTaintKey`` is renamed."""

Kind = tuple[str, str]
"""(apiVersion, kind)."""

KUEUE_RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"
"""Kueue's finalizer on its objects while something refers to them (decision 0048)."""

WORKLOAD_CHILDREN: Final[frozenset[Kind]] = frozenset(
    {
        ("batch/v1", "Job"),
        ("apps/v1", "Deployment"),
        ("v1", "ConfigMap"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "Service"),
        ("ray.io/v1", "RayJob"),
        # A RayService goes inside the AppWrapper that Kueue admits, never on its own.
        ("workload.codeflare.dev/v1beta2", "AppWrapper"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    }
)
KUEUE_CLUSTER_KINDS: Final[frozenset[Kind]] = frozenset(
    {
        (KUEUE_API, "ClusterQueue"),
        (KUEUE_API, "ResourceFlavor"),
        (KUEUE_API, "WorkloadPriorityClass"),
        (KUEUE_API, "Topology"),
    }
)
LOCAL_QUEUE: Final[Kind] = (KUEUE_API, "LocalQueue")
NODE: Final[Kind] = ("v1", "Node")
POD: Final[Kind] = ("v1", "Pod")
PVC: Final[Kind] = ("v1", "PersistentVolumeClaim")
ROLE: Final[Kind] = (RBAC_API, "Role")
ROLE_BINDING: Final[Kind] = (RBAC_API, "RoleBinding")
MODEL_CHILDREN: Final[frozenset[Kind]] = frozenset(
    {
        POD,
        ("v1", "ConfigMap"),
        ("batch/v1", "Job"),
        ROLE,
        ROLE_BINDING,
    }
)
ROLE_VERBS: Final = frozenset({"get", "patch"})
GPU_WORKLOAD: Final[Kind] = (KAIWO_API, "GpuWorkload")
KAIWO_CONFIG: Final[Kind] = (CONFIG_API, "KaiwoConfig")
AIM_NAMESPACE_CONFIG: Final[Kind] = (CONFIG_API, "AIMNamespaceConfig")


@dataclass(frozen=True, slots=True)
class Confinement:
    """What plans of one owner kind may write."""

    children: frozenset[Kind]
    namespaced: bool
    """The owner is namespaced, and so must every namespaced child be, in its namespace."""
    may_delete_itself: bool = False
    shared: frozenset[Kind] = frozenset()
    """Kinds the owner may create for others to use as well (``Plan.shared``)."""
    finalizers: frozenset[str] = frozenset()
    """The operator's finalizers on owners of this kind (``Plan.finalizers``)."""
    scalable: bool = False
    """Plans may set the owner's replicas through its scale subresource (``Plan.scale``)."""
    label_prefixes: tuple[str, ...] = ()
    """Label key prefixes the operator owns on owners of this kind (``Plan.owner_labels``)."""
    releasable_finalizers: frozenset[str] = frozenset()
    """Other controllers' finalizers a plan may take off children it deletes."""
    preempts: bool = False
    """Plans may preempt the workload the owner's spec names (``Plan.preempt``)."""
    has_status: bool = True
    """The owner kind has a status a plan may write (``Plan.status``)."""

    def owns_label(self, key: str) -> bool:
        return key.startswith(self.label_prefixes) if self.label_prefixes else False


CONFINEMENTS: Final[Mapping[Kind, Confinement]] = {
    # No plan deletes its owner (a workload past its duration is TERMINATED, its children
    # removed, as upstream), and the executor's role cannot delete workloads.
    (KAIWO_API, "KaiwoJob"): Confinement(children=WORKLOAD_CHILDREN, namespaced=True),
    (KAIWO_API, "KaiwoService"): Confinement(children=WORKLOAD_CHILDREN, namespaced=True),
    (KAIWO_API, "KaiwoQueueConfig"): Confinement(
        children=KUEUE_CLUSTER_KINDS | {LOCAL_QUEUE, NODE},
        namespaced=False,
        releasable_finalizers=frozenset({KUEUE_RESOURCE_IN_USE_FINALIZER}),
    ),
    (KUBEAI_API, "Model"): Confinement(
        children=MODEL_CHILDREN,
        namespaced=True,
        shared=frozenset({PVC}),
        finalizers=frozenset({CACHE_EVICTION_FINALIZER}),
        scalable=True,
        label_prefixes=(MODEL_FEATURE_LABEL_PREFIX,),
    ),
    # The record of a GPU workload no Kaiwo kind owns: its status, the preemption of the
    # workload it names, and its own deletion once that workload is gone (its TTL).
    GPU_WORKLOAD: Confinement(
        children=frozenset(), namespaced=True, may_delete_itself=True, preempts=True
    ),
    # The configuration objects own nothing and have no status: their plans carry only a
    # Warning Event on them, when the operator cannot use them as written (decision 0206).
    KAIWO_CONFIG: Confinement(children=frozenset(), namespaced=False, has_status=False),
    AIM_NAMESPACE_CONFIG: Confinement(children=frozenset(), namespaced=True, has_status=False),
}
SINGLETON_KINDS: Final[frozenset[Kind]] = frozenset({(KAIWO_API, "KaiwoQueueConfig"), KAIWO_CONFIG})


def inventory_selector(owner: ObjectRef) -> dict[str, str]:
    """The labels that mark the owner's children: a prune selector must ask for them (and
    may ask for more, which only narrows it)."""
    if owner.kind == "KaiwoQueueConfig":
        return {QUEUE_CONFIG_LABEL: owner.name}
    return {OWNER_UID_LABEL: owner.uid or ""}
