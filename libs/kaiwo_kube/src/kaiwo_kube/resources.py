"""Resource types the operator addresses, without discovery: group, version, plural, kind, scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Only named here: the catalogue must not load the API models (pydantic), so that the
    # commands start fast.
    from kaiwo_contracts.crds.base import CrdInfo


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource, e.g. ``batch/v1`` ``jobs`` (``Job``, namespaced)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def from_crd_info(cls, info: CrdInfo) -> ResourceType:
        return cls(
            group=info.group,
            version=info.version,
            plural=info.plural,
            kind=info.kind,
            namespaced=info.scope == "Namespaced",
        )

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path; a namespaced type without ``namespace`` means all namespaces."""
        parts = ["/api/v1"] if not self.group else [f"/apis/{self.group}/{self.version}"]
        if self.namespaced and namespace:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}" if self.group else self.plural


def _t(api_version: str, plural: str, kind: str, *, namespaced: bool = True) -> ResourceType:
    group, _, version = api_version.rpartition("/")
    return ResourceType(
        group=group, version=version, plural=plural, kind=kind, namespaced=namespaced
    )


# Kaiwo's own kinds.
KAIWO_JOB = _t("kaiwo.silogen.ai/v1alpha1", "kaiwojobs", "KaiwoJob")
KAIWO_SERVICE = _t("kaiwo.silogen.ai/v1alpha1", "kaiwoservices", "KaiwoService")
KAIWO_QUEUE_CONFIG = _t(
    "kaiwo.silogen.ai/v1alpha1", "kaiwoqueueconfigs", "KaiwoQueueConfig", namespaced=False
)
KAIWO_CONFIG = _t(
    "config.kaiwo.silogen.ai/v1alpha1", "kaiwoconfigs", "KaiwoConfig", namespaced=False
)
AIM_NAMESPACE_CONFIG = _t(
    "config.kaiwo.silogen.ai/v1alpha1", "aimnamespaceconfigs", "AIMNamespaceConfig"
)
# KubeAI.
KUBEAI_MODEL = _t("kubeai.org/v1", "models", "Model")
GPU_WORKLOAD = _t("kaiwo.silogen.ai/v1alpha1", "gpuworkloads", "GpuWorkload")
# Workload children.
JOB = _t("batch/v1", "jobs", "Job")
DEPLOYMENT = _t("apps/v1", "deployments", "Deployment")
STATEFUL_SET = _t("apps/v1", "statefulsets", "StatefulSet")
REPLICA_SET = _t("apps/v1", "replicasets", "ReplicaSet")
RAY_CLUSTER = _t("ray.io/v1", "rayclusters", "RayCluster")
RAY_JOB = _t("ray.io/v1", "rayjobs", "RayJob")
RAY_SERVICE = _t("ray.io/v1", "rayservices", "RayService")
APP_WRAPPER = _t("workload.codeflare.dev/v1beta2", "appwrappers", "AppWrapper")
HTTP_ROUTE = _t("gateway.networking.k8s.io/v1", "httproutes", "HTTPRoute")
GATEWAY = _t("gateway.networking.k8s.io/v1", "gateways", "Gateway")
# Model children: the Role letting adapter loaders label their own Pods, and its binding.
ROLE = _t("rbac.authorization.k8s.io/v1", "roles", "Role")
ROLE_BINDING = _t("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding")
# Kueue.
KUEUE_RESOURCE_FLAVOR = _t(
    "kueue.x-k8s.io/v1beta1", "resourceflavors", "ResourceFlavor", namespaced=False
)
KUEUE_CLUSTER_QUEUE = _t(
    "kueue.x-k8s.io/v1beta1", "clusterqueues", "ClusterQueue", namespaced=False
)
KUEUE_LOCAL_QUEUE = _t("kueue.x-k8s.io/v1beta1", "localqueues", "LocalQueue")
KUEUE_WORKLOAD_PRIORITY_CLASS = _t(
    "kueue.x-k8s.io/v1beta1",
    "workloadpriorityclasses",
    "WorkloadPriorityClass",
    namespaced=False,
)
KUEUE_WORKLOAD = _t("kueue.x-k8s.io/v1beta1", "workloads", "Workload")
KUEUE_COHORT = _t("kueue.x-k8s.io/v1beta1", "cohorts", "Cohort", namespaced=False)
KUEUE_TOPOLOGY = _t("kueue.x-k8s.io/v1beta1", "topologies", "Topology", namespaced=False)
# Core and platform.
PERSISTENT_VOLUME_CLAIM = _t("v1", "persistentvolumeclaims", "PersistentVolumeClaim")
CONFIG_MAP = _t("v1", "configmaps", "ConfigMap")
SECRET = _t("v1", "secrets", "Secret")
SERVICE = _t("v1", "services", "Service")
POD = _t("v1", "pods", "Pod")
BINDING = _t("v1", "bindings", "Binding")
"""Assigns a pod to a node (create only): what a scheduler writes; the sandbox's on a real API
server."""
NODE = _t("v1", "nodes", "Node", namespaced=False)
PRIORITY_CLASS = _t("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", namespaced=False)
NAMESPACE = _t("v1", "namespaces", "Namespace", namespaced=False)
EVENT = _t("v1", "events", "Event")
LEASE = _t("coordination.k8s.io/v1", "leases", "Lease")
CUSTOM_RESOURCE_DEFINITION = _t(
    "apiextensions.k8s.io/v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)

CATALOGUE: tuple[ResourceType, ...] = (
    KAIWO_JOB, KAIWO_SERVICE, KAIWO_QUEUE_CONFIG, KAIWO_CONFIG, AIM_NAMESPACE_CONFIG,
    KUBEAI_MODEL, GPU_WORKLOAD, JOB, DEPLOYMENT, STATEFUL_SET, REPLICA_SET, RAY_JOB,
    RAY_CLUSTER, RAY_SERVICE, APP_WRAPPER, HTTP_ROUTE, GATEWAY, ROLE, ROLE_BINDING,
    KUEUE_RESOURCE_FLAVOR, KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE, KUEUE_WORKLOAD_PRIORITY_CLASS,
    KUEUE_WORKLOAD, KUEUE_TOPOLOGY, KUEUE_COHORT, PERSISTENT_VOLUME_CLAIM, CONFIG_MAP, SECRET,
    SERVICE, POD, BINDING, NODE, PRIORITY_CLASS, NAMESPACE, EVENT, LEASE,
    CUSTOM_RESOURCE_DEFINITION,
)  # fmt: skip

_BY_KIND = {(t.api_version, t.kind): t for t in CATALOGUE}


def known_type(api_version: str, kind: str) -> ResourceType | None:
    """The catalogued type for an apiVersion and kind, if the operator knows it."""
    return _BY_KIND.get((api_version, kind))


def object_identity(obj: dict[str, Any]) -> tuple[str, str, str, str | None]:
    """(apiVersion, kind, name, namespace) of an object in JSON form."""
    metadata = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(metadata.get("name", "")),
        metadata.get("namespace"),
    )
