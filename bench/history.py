"""A recorded history for the replay and store benchmarks, made the way production makes it.

Observations are published on an in-memory JetStream; the real planner service plans them
(its projection, fan-out, assumed statuses and publish-only-news rule); an executor's result
is published for every plan (caused by it, naming the objects it applied); and the real
recorder stores every stream message as it would (stream ids, NATS metadata). Only the
processes and the API server are missing: each workload walks through the life a cluster
would give it, written here by hand: the KaiwoJob is created, its batch Job and Kueue
Workload appear (the Job as the executor applied the planner's desired one, with the API
server's defaults), the status the plan asked for is written back, the Workload is admitted,
the Pod and the Job run, the status is written again, the Pod and the Job succeed, and the
KaiwoJob is deleted with its children. Sixteen nodes, a KaiwoConfig and the
KaiwoQueueConfig come first.

Workloads come in waves (``wave`` at a time, each wave's lives interleaved stage by stage),
so the cluster holds a bounded number of workloads however long the history, as a busy
cluster does over a week.

Uses only APIs the project has had since the recorder and replay exist, so an older
checkout's interpreter can write the same history into a store of its own format
(``python bench/history.py --workloads N --store sqlite:///PATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kaiwo_contracts.events import ApplyResultV1, Envelope, ObservedObjectV1, PlanDecidedV1
from kaiwo_contracts.events.results import ActionOutcome
from kaiwo_contracts.events.streams import PLAN_STREAM, bus_topology
from kaiwo_contracts.events.subjects import observed_subject, result_subject
from kaiwo_contracts.plans import ObjectRef
from kaiwo_eventstore import open_event_store
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from kaiwo_watcher.observation import without_field_sets

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NAMESPACE = "ml-team"
KAIWO = "kaiwo.silogen.ai/v1alpha1"
DEFAULT_WAVE = 200


# --------------------------------------------------------------------------- the cluster


def node(index: int) -> dict[str, Any]:
    capacity = {"cpu": "128", "memory": "1Ti", "pods": "110", "amd.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"mi300x-{index}",
            "uid": f"node-{index}",
            "labels": {
                "kubernetes.io/hostname": f"mi300x-{index}",
                "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
                "beta.amd.com/gpu.family.AI": "8",
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def settings_objects() -> list[dict[str, Any]]:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    kaiwo_config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "kaiwo-config"},
        "spec": {"storage": {"defaultStorageClass": "rwx"}},
    }
    quota = [
        {"name": "cpu", "nominalQuota": 2048},
        {"name": "memory", "nominalQuota": "16Ti"},
        {"name": "amd.com/gpu", "nominalQuota": 128},
    ]
    queue_config = {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "queue-config", "generation": 1},
        "spec": {
            "resourceFlavors": [{"name": "mi300x", "nodeLabels": {"kaiwo/nodepool": "mi300x"}}],
            "clusterQueues": [
                {
                    "name": "kaiwo",
                    "namespaces": [NAMESPACE],
                    "spec": {
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                                "flavors": [{"name": "mi300x", "resources": quota}],
                            }
                        ]
                    },
                }
            ],
        },
    }
    return [namespace, kaiwo_config, queue_config]


def uid_of(name: str) -> str:
    """A uid as the API server makes them (36 characters), stable across runs."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kaiwo-bench/{name}"))


def managed_fields(manager: str, *, paths: dict[str, Any], status: bool) -> list[dict[str, Any]]:
    """managedFields as server-side apply and the controllers leave them."""
    entries = [
        {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2026-03-01T12:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": paths,
        }
    ]
    if status:
        entries.append(
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-03-01T12:00:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {}, "f:startTime": {}, "f:active": {}}},
                "subresource": "status",
            }
        )
    return entries


def container(workload: Workload) -> dict[str, Any]:
    """The training container as the API server returns it (defaults filled in)."""
    return {
        "name": "main",
        "image": "ghcr.io/silogen/rocm-ray:6.4",
        "command": ["sh", "-c", "python train.py --epochs 3 --output /workload/out"],
        "env": [
            {"name": "KAIWO_WORKLOAD", "value": workload.name},
            {"name": "HF_HOME", "value": "/workload/.cache/huggingface"},
            {"name": "NCCL_DEBUG", "value": "WARN"},
        ],
        "resources": {
            "limits": {"amd.com/gpu": "1", "cpu": "8", "memory": "64Gi"},
            "requests": {"amd.com/gpu": "1", "cpu": "8", "memory": "64Gi"},
        },
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def pod_spec(workload: Workload) -> dict[str, Any]:
    return {
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            },
        ],
        "containers": [container(workload)],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": "kaiwo-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }


SERVED_POD_DEFAULTS: dict[str, Any] = {
    "dnsPolicy": "ClusterFirst",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {},
    "schedulerName": "default-scheduler",
}
SERVED_CONTAINER_DEFAULTS: dict[str, Any] = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "imagePullPolicy": "IfNotPresent",
}


def served_job_spec(
    spec: dict[str, Any], job_uid: str, name: str, *, suspend: bool
) -> dict[str, Any]:
    """An applied Job spec as the API server serves it: its defaults where the apply left a
    field out, the selector and the pod template's labels it adds, and ``suspend`` as Kueue
    left it. What was applied stays as applied, so the planner finds its Job as it made it."""
    template = spec["template"]
    pod = template["spec"]
    served_pod = {
        **SERVED_POD_DEFAULTS,
        **pod,
        "containers": [{**SERVED_CONTAINER_DEFAULTS, **c} for c in pod["containers"]],
    }
    labels = {
        **(template.get("metadata") or {}).get("labels", {}),
        "batch.kubernetes.io/controller-uid": job_uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": job_uid,
        "job-name": name,
    }
    return {
        "completionMode": "NonIndexed",
        "manualSelector": False,
        "podReplacementPolicy": "TerminatingOrFailed",
        **spec,
        "suspend": suspend,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": job_uid}},
        "template": {**template, "metadata": {"labels": labels}, "spec": served_pod},
    }


@dataclass(frozen=True, slots=True)
class Workload:
    """One KaiwoJob and the objects the cluster makes for it, as the API server serves them."""

    index: int

    @property
    def name(self) -> str:
        return f"train-{self.index}"

    @property
    def uid(self) -> str:
        return uid_of(f"kaiwojob-{self.index}")

    @property
    def job_uid(self) -> str:
        return uid_of(f"job-{self.index}")

    def labels(self) -> dict[str, str]:
        return {
            "kaiwo.silogen.ai/run-id": self.uid,
            "kaiwo.silogen.ai/user": "alice",
            "kaiwo.silogen.ai/managed": "true",
            "kueue.x-k8s.io/queue-name": "kaiwo",
        }

    def kaiwo_job(self, status: dict[str, Any] | None = None) -> dict[str, Any]:
        job: dict[str, Any] = {
            "apiVersion": KAIWO,
            "kind": "KaiwoJob",
            "metadata": {
                "name": self.name,
                "namespace": NAMESPACE,
                "uid": self.uid,
                "generation": 1,
                "creationTimestamp": "2026-03-01T12:00:00Z",
                "labels": {"team": "vision", "project": "sweep-42"},
                "managedFields": managed_fields(
                    "kubectl",
                    paths={"f:metadata": {"f:labels": {"f:team": {}, "f:project": {}}},
                           "f:spec": {"f:user": {}, "f:image": {}, "f:entrypoint": {},
                                      "f:gpus": {}, "f:resources": {"f:requests": {}}}},
                    status=status is not None,
                ),
            },
            "spec": {
                "user": "alice@example.com",
                "image": "ghcr.io/silogen/rocm-ray:6.4",
                "entrypoint": "python train.py --epochs 3 --output /workload/out",
                "gpus": 1,
                "resources": {"requests": {"cpu": "8", "memory": "64Gi"}},
            },
        }  # fmt: skip
        if status is not None:
            job["status"] = status
        return job

    def batch_job(self, status: dict[str, Any], applied: dict[str, Any]) -> dict[str, Any]:
        """The batch Job as the API server serves it once the executor applied ``applied``
        (the planner's desired Job): its labels and spec, with the server's defaults."""
        desired_meta = applied["metadata"]
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                **desired_meta,
                "uid": self.job_uid,
                "generation": 1,
                "creationTimestamp": "2026-03-01T12:00:01Z",
                "managedFields": managed_fields(
                    "kaiwo-executor",
                    paths={"f:metadata": {"f:labels": {}, "f:ownerReferences": {}},
                           "f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}},
                    status=bool(status),
                ),
            },
            "spec": served_job_spec(applied["spec"], self.job_uid, self.name,
                                    suspend=not status),
            "status": {**status, "observedGeneration": 1},
        }  # fmt: skip

    def pod(self, phase: str) -> dict[str, Any]:
        started = phase != "Pending"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{self.name}-x8q2w",
                "generateName": f"{self.name}-",
                "namespace": NAMESPACE,
                "uid": uid_of(f"pod-{self.index}"),
                "creationTimestamp": "2026-03-01T12:00:02Z",
                "labels": {
                    **self.labels(),
                    "batch.kubernetes.io/controller-uid": self.job_uid,
                    "batch.kubernetes.io/job-name": self.name,
                    "job-name": self.name,
                },
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": self.name,
                        "uid": self.job_uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "managedFields": managed_fields(
                    "kube-controller-manager",
                    paths={"f:metadata": {"f:generateName": {}, "f:labels": {}},
                           "f:spec": {"f:containers": {}, "f:volumes": {}}},
                    status=started,
                ),
            },
            "spec": {**pod_spec(self), "nodeName": f"mi300x-{self.index % 16}"},
            "status": {
                "phase": phase,
                "conditions": [
                    {"type": "PodScheduled", "status": "True",
                     "lastTransitionTime": "2026-03-01T12:00:02Z"},
                    {"type": "Ready", "status": "True" if phase == "Running" else "False",
                     "lastTransitionTime": "2026-03-01T12:00:09Z"},
                ],
                "hostIP": f"10.0.0.{self.index % 16 + 10}",
                "podIP": f"10.244.{self.index % 16}.{self.index % 250 + 2}" if started else None,
                "qosClass": "Guaranteed",
                "startTime": "2026-03-01T12:00:02Z",
            },
        }  # fmt: skip

    def kueue_workload(self, *, admitted: bool) -> dict[str, Any]:
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": f"job-{self.name}-3f1c2",
                "namespace": NAMESPACE,
                "uid": uid_of(f"workload-{self.index}"),
                "creationTimestamp": "2026-03-01T12:00:01Z",
                "labels": {"kueue.x-k8s.io/job-uid": self.job_uid,
                           "kaiwo.silogen.ai/run-id": self.uid},
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": self.name,
                     "uid": self.job_uid, "controller": True, "blockOwnerDeletion": True}
                ],
            },
            "spec": {
                "queueName": "kaiwo",
                "priority": 0,
                "active": True,
                "podSets": [{"name": "main", "count": 1, "template": {"spec": pod_spec(self)}}],
            },
            "status": {
                "conditions": [
                    {"type": "QuotaReserved", "status": "True" if admitted else "False",
                     "reason": "QuotaReserved" if admitted else "Pending",
                     "message": "Quota reserved in ClusterQueue kaiwo",
                     "lastTransitionTime": "2026-03-01T12:00:03Z"},
                    {"type": "Admitted", "status": "True" if admitted else "False",
                     "reason": "Admitted" if admitted else "Pending",
                     "message": "The workload is admitted",
                     "lastTransitionTime": "2026-03-01T12:00:03Z"},
                ],
                **({"admission": {"clusterQueue": "kaiwo", "podSetAssignments": [
                    {"name": "main", "flavors": {"amd.com/gpu": "mi300x", "cpu": "mi300x",
                                                 "memory": "mi300x"},
                     "resourceUsage": {"amd.com/gpu": "1", "cpu": "8", "memory": "64Gi"},
                     "count": 1}]}} if admitted else {}),
            },
        }  # fmt: skip


STAGES = 7
"""The stages of a workload's life before its end (:func:`stage_objects`)."""


def stage_objects(
    workload: Workload, stage: int, applied_job: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The objects stage ``stage`` of a workload's life changes, in the order a cluster
    would; ``applied_job``: the Job the planner asked for (the executor applied it after
    the first stage)."""
    if stage == 0:
        return [workload.kaiwo_job()]
    assert applied_job is not None, f"no Job planned for {workload.name}"
    job = applied_job
    stages: tuple[Callable[[], list[dict[str, Any]]], ...] = (
        lambda: [workload.batch_job({}, job), workload.kueue_workload(admitted=False)],
        lambda: [workload.kaiwo_job({"status": "PENDING"})],
        lambda: [workload.kueue_workload(admitted=True), workload.pod("Pending")],
        lambda: [workload.pod("Running"), workload.batch_job({"active": 1, "ready": 1}, job)],
        lambda: [workload.kaiwo_job({"status": "RUNNING", "startTime": "2026-03-01T12:00:00Z"})],
        lambda: [workload.pod("Succeeded"), workload.batch_job({"succeeded": 1}, job)],
    )
    return stages[stage - 1]()  # only this stage's objects are made


def deleted_stage(
    workload: Workload, applied_job: dict[str, Any]
) -> list[tuple[dict[str, Any], str]]:
    """The workload's end: its children go, then the KaiwoJob (as a garbage collector does)."""
    return [
        (workload.pod("Succeeded"), "DELETED"),
        (workload.kueue_workload(admitted=True), "DELETED"),
        (workload.batch_job({"succeeded": 1}, applied_job), "DELETED"),
        (workload.kaiwo_job({"status": "COMPLETE"}), "DELETED"),
    ]


# --------------------------------------------------------------------------- recording


@dataclass(slots=True)
class Recording:
    """The in-memory bus, the real planner and recorder, and the store they write."""

    server: MemoryJetStream
    bus: MemoryBus
    planner: PlannerService
    recorder: RecorderService
    version: int = 0
    plans_seen: int = 0
    applied_jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The Job each KaiwoJob's latest plan asked for, by the KaiwoJob's uid."""

    async def observe_wave(self, first: int, count: int) -> None:
        """The lives of workloads ``first``..``first + count - 1``, interleaved stage by
        stage, each stage planned (and its plans answered) before the next is observed."""
        workloads = [Workload(index) for index in range(first, first + count)]
        for stage in range(STAGES):
            await self.observe(
                [
                    (obj, "MODIFIED")
                    for workload in workloads
                    for obj in stage_objects(workload, stage, self.applied_jobs.get(workload.uid))
                ]
            )
        await self.observe(
            [
                version
                for workload in workloads
                for version in deleted_stage(workload, self.applied_jobs[workload.uid])
            ]
        )

    async def observe(self, versions: list[tuple[dict[str, Any], str]]) -> None:
        for obj, event_type in versions:
            self.version += 1
            await self.bus.publish(*observed(obj, self.version, event_type=event_type))
        while await self.planner.step(wait_seconds=0):
            pass
        await self.publish_results()
        while sum(
            [
                (await self.recorder.pump(c, wait_seconds=0)).messages
                for c in self.recorder.consumers
            ]
        ):
            pass

    async def publish_results(self) -> None:
        """What an executor would answer to each new plan: applied, naming what it applied."""
        messages = self.server.stream_messages(PLAN_STREAM)
        for message in messages[self.plans_seen :]:
            plan = Envelope[PlanDecidedV1].from_nats(message.headers, message.body)
            decided = plan.data
            owner = decided.plan.owner
            for obj in decided.plan.desired:
                if obj.get("kind") == "Job" and owner.kind == "KaiwoJob" and owner.uid:
                    self.applied_jobs[owner.uid] = obj
            actions = (
                *(
                    ActionOutcome(operation="apply", target=_ref(obj), outcome="applied")
                    for obj in decided.plan.desired
                ),
                ActionOutcome(operation="status", target=owner, outcome="applied"),
            )
            result = ApplyResultV1.summarise(
                plan_id=plan.id,
                plan_fingerprint=decided.fingerprint,
                owner=owner,
                actions=actions,
            )
            await self.bus.publish(
                plan.caused(data=result, source="/kaiwo/executor", time=plan.time),
                result_subject(
                    outcome="applied",
                    kind=owner.kind,
                    namespace=owner.namespace,
                    uid=owner.uid or owner.name,
                ),
            )
        self.plans_seen = len(messages)


def _ref(obj: Any) -> ObjectRef:
    meta = obj["metadata"]
    return ObjectRef(
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        name=meta["name"],
        namespace=meta.get("namespace"),
    )


def observed(
    obj: dict[str, Any], resource_version: int, *, event_type: str
) -> tuple[Envelope[Any], str]:
    meta = obj["metadata"]
    uid = meta.get("uid") or f"{obj['kind'].lower()}-{meta['name']}"
    version = str(resource_version)
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=uid,
        resource_version=version,
        event_type=event_type,
        # As the watcher publishes it: managedFields without their field sets.
        object=without_field_sets(
            {**obj, "metadata": {**meta, "uid": uid, "resourceVersion": version}}
        ),
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=T0 + timedelta(milliseconds=resource_version),
        id=f"{uid}:{version}",
        subject=f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"],
        correlationid=_correlation(obj, uid),
    )
    return envelope, observed_subject(kind=obj["kind"], namespace=meta.get("namespace"), uid=uid)


def _correlation(obj: dict[str, Any], uid: str) -> str:
    """The workload a child belongs to (its run-id label), else the object itself."""
    labels = obj["metadata"].get("labels") or {}
    return str(labels.get("kaiwo.silogen.ai/run-id") or uid)


async def record_history(url: str, *, workloads: int, wave: int = DEFAULT_WAVE) -> int:
    """Write the history of ``workloads`` KaiwoJobs into the store at ``url``; its events."""
    server = MemoryJetStream()
    bus = MemoryBus(server=server, topology=bus_topology())
    await bus.ensure_streams()
    planner = PlannerService(
        bus, MemoryKeyValue(), clock=lambda: T0, settings=PlannerSettings(resync_on_start=False)
    )
    await planner.start()
    store = await open_event_store(url)
    try:
        recorder = RecorderService(bus=bus, store=store, clock=lambda: T0 + timedelta(hours=1))
        recording = Recording(server=server, bus=bus, planner=planner, recorder=recorder)
        await recording.observe(
            [(node(index), "MODIFIED") for index in range(16)]
            + [(obj, "MODIFIED") for obj in settings_objects()]
        )
        for first in range(0, workloads, wave):
            await recording.observe_wave(first, min(wave, workloads - first))
        return await store.last_position()
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--store", required=True, help="sqlite:///PATH or postgresql://...")
    args = parser.parse_args()
    configure_logging(level="WARNING")
    started = time.perf_counter()
    events = asyncio.run(record_history(args.store, workloads=args.workloads))
    print(
        f"{events:,} events for {args.workloads:,} KaiwoJobs"
        f" in {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
