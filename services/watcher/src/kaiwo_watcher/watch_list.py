"""What the watcher lists and watches, and with which label selector.

* The served kinds (``kaiwo_contracts.crds.registry.SERVED_KINDS``): every object.
* Their children (Jobs, Deployments, RayJobs, AppWrappers, PVCs, ConfigMaps, Services,
  HTTPRoutes) and the Kueue objects a KaiwoQueueConfig manages: only objects labelled
  ``app.kubernetes.io/managed-by=kaiwo``, the label the planner puts on everything it creates
  (with ``kaiwo.silogen.ai/owner-uid`` on workload children).
* RayServices carrying ``kaiwo.silogen.ai/run-id``: a Ray KaiwoService's RayService is made
  by the AppWrapper controller from the AppWrapper's component, which carries the workload's
  labels but not the inventory labels (pruning them would delete what the AppWrapper owns).
  In a stream of its own (key ``rayservices.ray.io/v1#run-id``, decision 0185): watched by the
  managed-by label, no RayService of a service was ever seen, so its phase never left
  STARTING.
* Pods of our workloads: those carrying ``kaiwo.silogen.ai/run-id`` (a pod-template label the
  planner sets to the workload's uid). Pods the operator creates itself (a Model's server
  Pods): ``app.kubernetes.io/managed-by=kaiwo`` with ``kaiwo.silogen.ai/owner-uid``, a
  second stream of Pods (key ``pods#owned``).
* The system configuration of Models: ConfigMaps labelled
  ``kaiwo.silogen.ai/system-config=models`` in the operator's own namespace only (key
  ``configmaps#system-config``): configuration from any other namespace is never read.
* Kueue LocalQueues, ClusterQueues and ResourceFlavors the operator did not make
  (``…!=kaiwo``, key ``<plural>#users``): Kueue counts a GPU workload no Kaiwo kind owns in
  the ClusterQueue of the LocalQueue its label names, and lends freed quota only within that
  ClusterQueue's cohort, so idle preemption reads both (decisions 0260, 0270); it admits a
  workload only into the flavors whose node labels its pods may run on, so idle preemption
  reads those labels (decision 0283); a LocalQueue named ``default`` takes every job made in
  its namespace without a queue label (decision 0159).
* Kueue Workloads (Kueue creates them, so they carry none of our labels), Kueue Cohorts (the
  tree their ``parentName`` makes: quota is lent across it, decision 0271), Nodes, Namespaces,
  PriorityClasses and Kueue WorkloadPriorityClasses (a workload's ``priorityClass`` may name
  one a platform team made, decision 0045), Gateways (a KaiwoService's route serves only
  through a programmed one, decision 0273): every object.
* The roots of GPU workloads no Kaiwo kind owns (decision 0047), a second stream of each kind
  (key ``<plural>#gpu``): Jobs, Deployments, StatefulSets, RayJobs and RayClusters without
  the ``kaiwo.silogen.ai/owner-uid`` label, and Pods without any label a controller puts on
  the pods it makes (``kaiwo_contracts.gpu_workloads.BARE_POD_SELECTOR``: so a Job's or a
  Deployment's pods never reach the watcher on this stream). Of what the API server sends,
  only the roots asking for GPUs are published
  (:func:`kaiwo_contracts.gpu_workloads.is_gpu_root`, the target's ``accept``); one that
  stops being one (its GPUs removed, an owner added) is published as deleted.
* The pods of Jobs, Deployments and StatefulSets that wait for GPUs (decision 0066, key
  ``pods#waiting-gpu``): the API server sends only pods not yet bound to a node and not made
  by the operator (``spec.nodeName=,status.phase=Pending``, the kube-scheduler's own
  selection); of those, only the ones such a controller owns and the scheduler marked
  ``Unschedulable`` for lack of GPUs are published
  (:func:`kaiwo_contracts.gpu_workloads.is_controlled_pod_waiting_for_gpus`). A pod placed
  at last leaves the selection and is published as deleted.

The label keys mirror ``kaiwo_planner.domain.children.labels`` (services do not import each other; a
unit test checks they agree).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import crd_info
from kaiwo_contracts.gpu_workloads import (
    BARE_POD_SELECTOR,
    NOT_KAIWO_POD_SELECTOR,
    NOT_KAIWO_SELECTOR,
    UNBOUND_PENDING_POD_FIELDS,
    is_controlled_pod_waiting_for_gpus,
    is_gpu_root,
)
from kaiwo_kube import resources
from kaiwo_kube.resources import ResourceType

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_KAIWO = "kaiwo"
LABEL_OWNER_UID = "kaiwo.silogen.ai/owner-uid"
LABEL_RUN_ID = "kaiwo.silogen.ai/run-id"

LABEL_SYSTEM_CONFIG = "kaiwo.silogen.ai/system-config"
DEFAULT_OPERATOR_NAMESPACE = "kaiwo-system"

MANAGED_BY_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY_KAIWO}"
RUN_ID_SELECTOR = LABEL_RUN_ID
"""``key`` alone is the "exists" selector."""
RUN_ID_STREAM = "run-id"
"""A stream of its own: a checkpoint of the stream once watched by another selector would
resume where that one stopped, and miss the objects only the new selector takes."""
OWNED_POD_SELECTOR = f"{MANAGED_BY_SELECTOR},{LABEL_OWNER_UID}"
MODELS_CONFIG_SELECTOR = f"{LABEL_SYSTEM_CONFIG}=models"
NOT_MANAGED_SELECTOR = f"{LABEL_MANAGED_BY}!={MANAGED_BY_KAIWO}"
"""Objects without the managed-by label or with another value: disjoint from the managed."""
USERS_QUEUES_STREAM = "users"
"""LocalQueues, ClusterQueues and ResourceFlavors of others. Not the stream that once took
only LocalQueues named ``default`` (``default-queue``): a checkpoint of that one would resume
where it stopped and miss every other queue (see ``RUN_ID_STREAM``)."""


@dataclass(frozen=True, slots=True)
class WatchTarget:
    """One resource type to list and watch.

    ``workload``: the objects are workloads themselves (the served kinds), so each event
    correlates with the object's own uid rather than with an owner.
    ``field_selector``: the API server's field selector besides the labels (an object
    leaving it is sent as deleted). ``namespace``: watched in this namespace only, whatever
    namespaces the watcher is
    limited to. ``stream``: names a second target of the same resource (its checkpoint key).
    ``accept``: of the objects the selector lets through, those to publish (None: all); the
    API server cannot select on what it decides (a pod spec's resources).
    ``settings``: what planning reads of the cluster as a whole (configuration, queues,
    priorities, Nodes, Namespaces, Gateways), listed before the other streams start
    (decision 0294).
    """

    resource: ResourceType
    label_selector: str | None = None
    field_selector: str | None = None
    workload: bool = False
    namespace: str | None = None
    stream: str = ""
    accept: Callable[[Mapping[str, Any]], bool] | None = field(default=None, compare=False)
    settings: bool = False

    @property
    def kind(self) -> str:
        return self.resource.kind


SETTINGS_KINDS: frozenset[str] = frozenset(
    {"KaiwoConfig", "AIMNamespaceConfig", "KaiwoQueueConfig"}
)
"""The served kinds that configure the others rather than run anything."""


def served_targets() -> tuple[WatchTarget, ...]:
    """One target per served kind, in the registry's order."""
    targets = []
    for model in SERVED_KINDS:
        resource = ResourceType.from_crd_info(crd_info(model))
        targets.append(
            WatchTarget(resource=resource, workload=True, settings=resource.kind in SETTINGS_KINDS)
        )
    return tuple(targets)


CHILD_RESOURCES: tuple[ResourceType, ...] = (
    resources.JOB,
    resources.DEPLOYMENT,
    resources.RAY_JOB,
    resources.APP_WRAPPER,
    resources.PERSISTENT_VOLUME_CLAIM,
    resources.CONFIG_MAP,
    resources.SERVICE,
    resources.HTTP_ROUTE,
    resources.ROLE,
    resources.ROLE_BINDING,
)
"""Kinds the planner creates for a workload or a Model (a RayService: see the module)."""

MANAGED_KUEUE_RESOURCES: tuple[ResourceType, ...] = (
    resources.KUEUE_RESOURCE_FLAVOR,
    resources.KUEUE_CLUSTER_QUEUE,
    resources.KUEUE_LOCAL_QUEUE,
    resources.KUEUE_TOPOLOGY,
)
"""Kueue objects the planner derives from the KaiwoQueueConfig (WorkloadPriorityClasses too,
watched whole below)."""


GPU_ROOT_RESOURCES: tuple[ResourceType, ...] = (
    resources.JOB,
    resources.DEPLOYMENT,
    resources.STATEFUL_SET,
    resources.RAY_JOB,
    resources.RAY_CLUSTER,
)
"""Kinds whose roots may be GPU workloads no Kaiwo kind owns (bare Pods besides)."""
GPU_STREAM = "gpu"
WAITING_GPU_STREAM = "waiting-gpu"


def gpu_root_targets() -> tuple[WatchTarget, ...]:
    """The streams of the roots of GPU workloads no Kaiwo kind owns, and of their pods that
    wait for GPUs (module docstring)."""
    return (
        WatchTarget(
            resource=resources.POD,
            label_selector=BARE_POD_SELECTOR,
            stream=GPU_STREAM,
            accept=is_gpu_root,
        ),
        *(
            WatchTarget(
                resource=resource,
                label_selector=NOT_KAIWO_SELECTOR,
                stream=GPU_STREAM,
                accept=is_gpu_root,
            )
            for resource in GPU_ROOT_RESOURCES
        ),
        WatchTarget(
            resource=resources.POD,
            label_selector=NOT_KAIWO_POD_SELECTOR,
            field_selector=UNBOUND_PENDING_POD_FIELDS,
            stream=WAITING_GPU_STREAM,
            accept=is_controlled_pod_waiting_for_gpus,
        ),
    )


def default_watch_list(
    operator_namespace: str = DEFAULT_OPERATOR_NAMESPACE,
) -> tuple[WatchTarget, ...]:
    """Everything the planner and the monitor need to see, filtered as narrowly as possible."""
    return (
        *served_targets(),
        *(WatchTarget(resource=r, label_selector=MANAGED_BY_SELECTOR) for r in CHILD_RESOURCES),
        WatchTarget(
            resource=resources.RAY_SERVICE, label_selector=RUN_ID_SELECTOR, stream=RUN_ID_STREAM
        ),
        WatchTarget(resource=resources.POD, label_selector=RUN_ID_SELECTOR),
        WatchTarget(resource=resources.POD, label_selector=OWNED_POD_SELECTOR, stream="owned"),
        WatchTarget(
            resource=resources.CONFIG_MAP,
            label_selector=MODELS_CONFIG_SELECTOR,
            namespace=operator_namespace,
            stream="system-config",
            settings=True,
        ),
        WatchTarget(resource=resources.KUEUE_WORKLOAD),
        *(
            WatchTarget(resource=r, label_selector=MANAGED_BY_SELECTOR)
            for r in MANAGED_KUEUE_RESOURCES
        ),
        # Everyone else's queues (module docstring); Kaiwo's own come above.
        *(
            WatchTarget(
                resource=r,
                label_selector=NOT_MANAGED_SELECTOR,
                stream=USERS_QUEUES_STREAM,
                settings=True,
            )
            for r in (
                resources.KUEUE_LOCAL_QUEUE,
                resources.KUEUE_CLUSTER_QUEUE,
                resources.KUEUE_RESOURCE_FLAVOR,
            )
        ),
        *(
            WatchTarget(resource=r, settings=True)
            for r in (
                resources.KUEUE_WORKLOAD_PRIORITY_CLASS,
                resources.KUEUE_COHORT,
                resources.GATEWAY,
                resources.NODE,
                resources.NAMESPACE,
                resources.PRIORITY_CLASS,
            )
        ),
        *gpu_root_targets(),
    )


DEFAULT_WATCH_LIST: tuple[WatchTarget, ...] = default_watch_list()
