"""What a plan may touch: the confinement the executor checks before it carries a plan out.

The bus is authenticated and only the planner may publish plans (decision 0012); this is the
second line. A plan is carried out only when everything it writes or prunes belongs to its
owner:

* the owner is one of the kinds that own children (:data:`CONFINEMENTS`), and exists with the
  plan's uid; or the plan creates a missing cluster singleton (``createOnly``) and nothing
  else;
* every desired object is of a kind that owner may produce, in the owner's namespace (the
  KaiwoQueueConfig, cluster-scoped, owns cluster-scoped Kueue objects, LocalQueues in any
  namespace and node labels), and names the owner as its controller;
* a Node intent carries nothing but Kaiwo's own labels (``kaiwo/…``), Kaiwo's GPU taint and,
  with it, the annotation that records that taint's key (decision 0145);
* prune rules name only those kinds, with a selector that asks for the owner's own
  inventory label;
* explicit deletions (``Plan.delete``) name objects of those kinds, with a uid, in the
  owner's namespace (the executor also checks each one carries the owner's inventory labels
  before it deletes it); finalizers released (``Plan.release_finalizers``) are the owner
  kind's releasable ones, from objects the plan deletes;
* shared objects (``Plan.shared``, a Model cache's PVC) are of the kinds the owner may
  share, in its namespace, managed by Kaiwo and controlled by nobody;
* the finalizers a plan sets are the owner kind's own (``kubeai.org/cache-eviction``), and
  so are the owner labels (``features.kubeai.org/…`` on a Model);
* a plan scales (``Plan.scale``) only its owner, and only an owner of a kind with a scale
  the operator manages (a Model: its autoscaler), that has not switched autoscaling off, and
  no higher than the owner's ``maxReplicas`` (as the API server holds the owner);
* a Model's Role grants only ``get``/``patch`` of named Pods (its adapter loaders report
  what they loaded on their own Pod) and its RoleBinding binds only that Role to service
  accounts of its namespace;
* no plan deletes its owner, but a GpuWorkload's, once its workload is gone and its TTL
  has passed; a KaiwoQueueConfig not named ``kaiwo`` gets only its status; a KaiwoConfig or
  an AIMNamespaceConfig owns nothing and has no status: its plan carries only Events
  (decision 0206);
* a plan preempts (``Plan.preempt``) only as a GpuWorkload's plan, only the workload that
  GpuWorkload's spec names (its root object, by uid, in its namespace), only in the way
  preemption works for that kind (``kaiwo_contracts.gpu_workloads``: delete a Pod, Job, RayJob
  or RayCluster, scale a Deployment or StatefulSet to zero), and only when the workload or its
  Namespace carries the GPU-preemption opt-in annotations as the API server holds them now
  (decision 0047): nothing that did not opt in is ever preempted, whatever a plan says;
* a plan creating a GpuWorkload (``createOnly``) creates that one object, named after the
  opted-in root it names, and nothing else.

Pure: the caller supplies the owner as observed, the GPU taint key in force, and for a plan
that preempts or creates a GpuWorkload the workload and its Namespace as the API server holds
them (:class:`PreemptionTarget`).
"""

from __future__ import annotations

from kaiwo_contracts.confinement.check import refusals
from kaiwo_contracts.confinement.kinds import (
    CACHE_EVICTION_FINALIZER,
    CONFIG_API,
    CONFINEMENTS,
    DEFAULT_GPU_TAINT_KEY,
    GPU_TAINT_EFFECT,
    GPU_TAINT_RECORD_ANNOTATION,
    GPU_TAINT_VALUE,
    GPU_WORKLOAD,
    KAIWO_API,
    KAIWO_NODE_LABEL_PREFIX,
    KUBEAI_API,
    KUEUE_API,
    KUEUE_CLUSTER_KINDS,
    KUEUE_RESOURCE_IN_USE_FINALIZER,
    LOCAL_QUEUE,
    MANAGED_BY_LABEL,
    MODEL_CHILDREN,
    MODEL_FEATURE_LABEL_PREFIX,
    NODE,
    OWNER_UID_LABEL,
    POD,
    PVC,
    QUEUE_CONFIG_LABEL,
    RBAC_API,
    ROLE,
    ROLE_BINDING,
    ROLE_VERBS,
    SINGLETON,
    SINGLETON_KINDS,
    WORKLOAD_CHILDREN,
    Confinement,
    Kind,
    inventory_selector,
)
from kaiwo_contracts.confinement.preemption import PreemptionTarget, preemption_target_ref

__all__ = [
    "CACHE_EVICTION_FINALIZER",
    "CONFIG_API",
    "CONFINEMENTS",
    "DEFAULT_GPU_TAINT_KEY",
    "GPU_TAINT_EFFECT",
    "GPU_TAINT_RECORD_ANNOTATION",
    "GPU_TAINT_VALUE",
    "GPU_WORKLOAD",
    "KAIWO_API",
    "KAIWO_NODE_LABEL_PREFIX",
    "KUBEAI_API",
    "KUEUE_API",
    "KUEUE_CLUSTER_KINDS",
    "KUEUE_RESOURCE_IN_USE_FINALIZER",
    "LOCAL_QUEUE",
    "MANAGED_BY_LABEL",
    "MODEL_CHILDREN",
    "MODEL_FEATURE_LABEL_PREFIX",
    "NODE",
    "OWNER_UID_LABEL",
    "POD",
    "PVC",
    "QUEUE_CONFIG_LABEL",
    "RBAC_API",
    "ROLE",
    "ROLE_BINDING",
    "ROLE_VERBS",
    "SINGLETON",
    "SINGLETON_KINDS",
    "WORKLOAD_CHILDREN",
    "Confinement",
    "Kind",
    "PreemptionTarget",
    "inventory_selector",
    "preemption_target_ref",
    "refusals",
]
