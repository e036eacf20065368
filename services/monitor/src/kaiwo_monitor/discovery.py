"""GPU workloads no Kaiwo kind owns, found from the readings themselves (decision 0047).

The metrics endpoint reports the pods that use GPUs. A reading for a pod that is no Kaiwo
workload's (no ``kaiwo.silogen.ai/run-id``) names a candidate; only then does the monitor ask
the API server anything more, so a cluster without such pods costs no call at all. Each tick:

1. the namespaces of the candidates: one LIST of their Running pods each (field selector
   ``status.phase=Running``; the monitor's role lists pods already); a found root's running
   GPU pods without readings are its pods too (found through their controller references,
   intermediates remembered): they make its utilization unknown (decision 0173);
2. each candidate pod asking for GPUs, and made by no Kaiwo kind: its root, found by walking
   controller owner references upward with GETs (:func:`kaiwo_contracts.gpu_workloads.
   controller_reference`), through ReplicaSets to a Pod, Job, Deployment, StatefulSet,
   RayJob or RayCluster controlled by nothing, or a Job a CronJob controls (``ROOT_KINDS``,
   :func:`kaiwo_contracts.gpu_workloads.is_root`: a CronJob's runs are tracked one by one).
   An intermediate object's controller never changes, so it is remembered (by uid,
   :data:`REMEMBERED`); the root is read every tick, since its annotations say whether it
   takes part;
3. a root of another kind (a RayService's cluster, a JobSet's Job, an operator's resource),
   one the API server does not show (gone, forbidden) or one made by Kaiwo: not tracked.

What comes out is a :class:`~kaiwo_monitor.domain.pods.MonitoredPod` per pod, its workload the
root, and the root's annotations: the caller resolves the root's GPU idle-preemption settings
(its annotations over its namespace's) and only opted-in roots are judged and reported.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog
from kaiwo_contracts.gpu_workloads import (
    INTERMEDIATE_KINDS,
    ROOT_KINDS,
    controller_reference,
    is_root,
    kind_of,
    made_by_kaiwo,
    pod_gpus,
)
from kaiwo_kube import KubeError, NotFound, resources
from kaiwo_kube.resources import known_type

from kaiwo_monitor.cluster_port import ClusterReader
from kaiwo_monitor.domain.pods import GpuVendor, MonitoredPod, workload_ref
from kaiwo_monitor.domain.samples import GpuSample

log = structlog.get_logger("kaiwo.monitor")

MAX_DEPTH: Final = 10
"""Owner chains are short; this stops a reference cycle (upstream's bound too)."""
REMEMBERED: Final = 4096
"""Intermediate objects remembered (uid -> controller reference); the oldest go first."""
RUNNING: Final = "status.phase=Running"


@dataclass(frozen=True, slots=True)
class ForeignWorkload:
    """A root found this tick, with its annotations (for the opt-in) and its pods."""

    root: Mapping[str, Any]
    pods: tuple[MonitoredPod, ...]

    @property
    def uid(self) -> str:
        return str((self.root.get("metadata") or {}).get("uid") or "")

    @property
    def annotations(self) -> dict[str, str]:
        found = (self.root.get("metadata") or {}).get("annotations") or {}
        return {str(key): str(value) for key, value in found.items()}


def candidate_pods(
    samples: Iterable[GpuSample], known: Iterable[MonitoredPod]
) -> dict[str, frozenset[str]]:
    """Pods with readings that are no Kaiwo workload's, by namespace (pure)."""
    ours = {(pod.namespace, pod.name) for pod in known}
    found: dict[str, set[str]] = defaultdict(set)
    for sample in samples:
        if (sample.namespace, sample.pod) not in ours:
            found[sample.namespace].add(sample.pod)
    return {namespace: frozenset(names) for namespace, names in sorted(found.items())}


class RootFinder:
    """Finds the roots of candidate pods (module docstring); keeps intermediate objects'
    controller references between ticks."""

    def __init__(self, kube: ClusterReader, *, remembered: int = REMEMBERED) -> None:
        self._kube = kube
        self._limit = remembered
        self._controllers: OrderedDict[str, Mapping[str, Any] | None] = OrderedDict()
        self.reads = 0
        """API calls made (lists and gets), for tests and figures."""

    async def workloads(
        self, candidates: Mapping[str, frozenset[str]]
    ) -> tuple[ForeignWorkload, ...]:
        """The roots of the candidates that ask for GPUs, each with its pods, by uid order.
        Raises :class:`KubeError` when a namespace's pods cannot be listed."""
        roots: dict[str, Mapping[str, Any]] = {}
        pods: dict[str, list[MonitoredPod]] = defaultdict(list)
        for namespace, names in candidates.items():
            self.reads += 1
            listed = await self._kube.list(
                resources.POD, namespace=namespace, field_selector=RUNNING
            )
            gpu_pods = [
                pod
                for pod in listed.items
                if not made_by_kaiwo(pod) and pod_gpus(pod.get("spec") or {})
            ]
            unread: list[Mapping[str, Any]] = []
            for pod in gpu_pods:
                name = str((pod.get("metadata") or {}).get("name") or "")
                if name not in names:
                    unread.append(pod)
                    continue
                root = await self._root_of({**pod, "apiVersion": "v1", "kind": "Pod"})
                if root is None:
                    continue
                uid = str(root["metadata"]["uid"])
                roots[uid] = root
                pods[uid].append(_monitored(pod, root))
            # A found root's other running GPU pods, without readings: they make its use
            # unknown (decision 0173), so they must be known too.
            for sibling in unread:
                above = await self._found_root_above(sibling, roots)
                if above is not None:
                    pods[above].append(_monitored(sibling, roots[above]))
        return tuple(
            ForeignWorkload(root=roots[uid], pods=tuple(pods[uid])) for uid in sorted(roots)
        )

    async def _root_of(self, pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
        namespace = (pod.get("metadata") or {}).get("namespace")
        reference = controller_reference(pod)
        if reference is None:
            return pod if _trackable(pod) else None
        for _ in range(MAX_DEPTH):
            kind = kind_of_reference(reference)
            if kind in INTERMEDIATE_KINDS:
                above = await self._controller_of(reference, kind, namespace)
            elif kind in ROOT_KINDS:
                found = await self._read(kind, reference, namespace)
                if found is None:
                    return None
                if is_root(found):  # nothing above, or a CronJob above its Job
                    return found if _trackable(found) else None
                above = controller_reference(found)
            else:
                return None  # a RayService's cluster, a JobSet's Job, another operator's
            if above is None:
                return None
            reference = above
        return None

    async def _found_root_above(
        self, pod: Mapping[str, Any], roots: Mapping[str, Mapping[str, Any]]
    ) -> str | None:
        """The uid of the root among ``roots`` that ``pod`` belongs to, or None. Only the
        controller references are walked (intermediates remembered), roots are not read: a
        pod of no found root costs at most the reads of its new ReplicaSets."""
        namespace = (pod.get("metadata") or {}).get("namespace")
        reference = controller_reference(pod)
        for _ in range(MAX_DEPTH):
            if reference is None:
                return None
            uid = str(reference.get("uid") or "")
            if uid in roots:
                return uid
            kind = kind_of_reference(reference)
            if kind not in INTERMEDIATE_KINDS:
                return None
            reference = await self._controller_of(reference, kind, namespace)
        return None

    async def _controller_of(
        self, reference: Mapping[str, Any], kind: tuple[str, str], namespace: str | None
    ) -> Mapping[str, Any] | None:
        """An intermediate object's controller reference (remembered: it never changes)."""
        uid = str(reference.get("uid") or "")
        if uid in self._controllers:
            self._controllers.move_to_end(uid)
            return self._controllers[uid]
        found = await self._read(kind, reference, namespace)
        if found is None:
            return None
        controller = controller_reference(found)
        self._controllers[uid] = controller
        while len(self._controllers) > self._limit:
            self._controllers.popitem(last=False)
        return controller

    async def _read(
        self, kind: tuple[str, str], reference: Mapping[str, Any], namespace: str | None
    ) -> Mapping[str, Any] | None:
        name, uid = str(reference.get("name") or ""), str(reference.get("uid") or "")
        resource = known_type(*kind)
        if resource is None:
            return None
        self.reads += 1
        try:
            found = await self._kube.get(resource, name, namespace=namespace)
        except NotFound:
            return None
        except KubeError as error:  # forbidden, say: that workload is not tracked this tick
            log.info("cannot read an owner of a GPU pod", kind=kind[1], error=str(error))
            return None
        if str((found.get("metadata") or {}).get("uid") or "") != uid:
            return None  # replaced by another object of the same name
        return {**found, "apiVersion": kind[0], "kind": kind[1]}


def kind_of_reference(reference: Mapping[str, Any]) -> tuple[str, str]:
    return (str(reference.get("apiVersion") or ""), str(reference.get("kind") or ""))


def _trackable(root: Mapping[str, Any]) -> bool:
    return kind_of(root) in ROOT_KINDS and not made_by_kaiwo(root)


def _monitored(pod: Mapping[str, Any], root: Mapping[str, Any]) -> MonitoredPod:
    metadata = pod.get("metadata") or {}
    root_metadata = root.get("metadata") or {}
    api_version, kind = kind_of(root)
    gpus = pod_gpus(pod.get("spec") or {})
    nvidia = any(name.startswith("nvidia.com/") for name in gpus)
    vendor: GpuVendor = "nvidia" if nvidia else "amd"
    return MonitoredPod(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        workload=workload_ref(
            kind=kind,
            name=str(root_metadata.get("name") or ""),
            namespace=str(root_metadata.get("namespace") or ""),
            uid=str(root_metadata.get("uid") or ""),
            api_version=api_version,
        ),
        requested_gpus=sum(gpus.values()),
        vendor=vendor,
        running=(pod.get("status") or {}).get("phase") == "Running",
    )
