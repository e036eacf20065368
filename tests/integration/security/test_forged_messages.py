"""A message on the bus is a claim, not an order: the attacks of issue 23 made with the services'
own keys on a real nats-server, against the real API server (decision 0038).

* The watcher's key: observations of existing objects, with their real uids and tampered
  content (a KaiwoJob with hostPID, hostNetwork, hostPath /, privileged, another service
  account and image; a KaiwoQueueConfig with a quota of 100000 and a queue for kube-system; a
  KaiwoConfig naming another scheduler; an AIMNamespaceConfig that does not exist; a Model
  with replicas its user did not write). The executor refuses every plan made from them,
  nothing of them reaches the cluster, and the watcher's re-observation brings the real
  objects back into the planner, whose next plans are carried out.
* The monitor's key: a finding saying policy ``Always`` and grace 0 for a workload that never
  opted in to idle preemption. The workload keeps running.
* The gateway's key: a scale decision from 0 to 20 for another tenant's Model without
  ``maxReplicas``. It gets the cluster's ceiling (8), not 20.

One operator serves the module; the tests run in order.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import nats.js.errors
import pytest
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope, object_subject
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.permissions import GATEWAY, MONITOR, WATCHER
from kaiwo_contracts.events.streams import (
    MONITOR_STREAM,
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
    bus_topology,
)
from kaiwo_contracts.events.subjects import monitor_subject, observed_subject, scale_subject
from kaiwo_contracts.plans import ObjectRef
from kaiwo_kube import resources
from kaiwo_runtime.nats_bus import NatsBus

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually
from tests.integration.pipeline.model_actors import a_model, model_pods

pytestmark = [
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.k8s,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.parametrize("shared_pipeline", ["real"], indirect=True),
]

KAIWO: Final = "kaiwo.silogen.ai/v1alpha1"
AHEAD: Final = 1_000_000
"""How far ahead of the real resourceVersion a forged observation claims to be: newer than
anything the planner holds, so it is taken in."""


# ---------------------------------------------------------------------- the forger


async def publish_as(
    pipeline: Pipeline, identity: str, envelope: Envelope[Any], subject: str
) -> None:
    """Publish with a service's own key, as whoever stole it would."""
    bus = await NatsBus.connect(
        pipeline.stack.nats_connection(identity), topology=bus_topology(), name="forger"
    )
    try:
        await bus.publish(envelope, subject)
    finally:
        await bus.close()


async def forge_observation(pipeline: Pipeline, obj: dict[str, Any]) -> None:
    """``obj`` published with the watcher's key, as a version newer than the real one."""
    metadata = obj["metadata"]
    version = str(int(metadata.get("resourceVersion") or "0") + AHEAD)
    forged = {**obj, "metadata": {**metadata, "resourceVersion": version}}
    namespace = metadata.get("namespace")
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=namespace,
        name=metadata["name"],
        uid=metadata["uid"],
        resource_version=version,
        event_type="MODIFIED",
        object=forged,
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=datetime.now(UTC),
        id=f"{metadata['uid']}:{version}",
        subject=object_subject(namespace=namespace, name=metadata["name"]),
        correlationid=metadata["uid"],
    )
    subject = observed_subject(kind=obj["kind"], namespace=namespace, uid=metadata["uid"])
    await publish_as(pipeline, WATCHER, envelope, subject)


async def stored(pipeline: Pipeline, stream: str, subjects: str) -> AsyncIterator[Any]:
    """The messages of ``stream`` on ``subjects``, in stream order."""
    jsm = pipeline.nats.jsm()
    sequence = 1
    while True:
        try:
            message = await jsm.get_msg(stream, seq=sequence, subject=subjects, next=True)
        except nats.js.errors.NotFoundError:
            return
        yield message
        sequence = message.seq + 1


Effect = Callable[[], Awaitable[str | None]]
"""What the attack did to the cluster, when it did something (None: nothing yet)."""


async def refused(pipeline: Pipeline, uid: str, *, unless: Effect | None = None) -> int:
    """Wait for the executor's refusal of a plan of the owner ``uid``; its sequence. Should
    the attack take effect first (``unless`` says what it did), fail saying so."""

    async def check() -> int | str | Pending:
        async for message in stored(pipeline, RESULT_STREAM, f"kaiwo.res.refused.*.*.{uid}"):
            return int(message.seq)
        done = await unless() if unless is not None else None
        return done if done is not None else Pending("no refusal yet")

    found = await eventually(check, what=f"a plan of {uid} refused")
    assert isinstance(found, int), f"the attack worked: {found}"
    return found


async def observed_again(pipeline: Pipeline, uid: str) -> None:
    """Wait for the watcher's re-observation of ``uid`` (marked reobserved)."""

    async def check() -> bool | Pending:
        async for message in stored(pipeline, OBSERVED_STREAM, f"kaiwo.obs.*.*.{uid}"):
            if message.headers.get("ce-id", "").startswith("reobserved:"):
                return True
        return Pending("not observed again yet")

    await eventually(check, what=f"{uid} observed again")


async def applied_after(pipeline: Pipeline, uid: str, sequence: int) -> None:
    """Wait for a plan of ``uid`` carried out after the stream position ``sequence``."""

    async def check() -> bool | Pending:
        async for message in stored(pipeline, RESULT_STREAM, f"kaiwo.res.applied.*.*.{uid}"):
            if message.seq > sequence:
                return True
        return Pending("no plan carried out since the refusal")

    await eventually(check, what=f"a plan of {uid} carried out again")


async def settled(pipeline: Pipeline, stream: str, consumer: str) -> None:
    """Wait until ``consumer`` has delivered and acknowledged everything ``stream`` holds."""

    async def check() -> bool | Pending:
        info = await pipeline.js.consumer_info(stream, consumer)
        last = (await pipeline.js.stream_info(stream)).state.last_seq
        done = info.delivered.stream_seq >= last and info.num_ack_pending == 0
        return True if done else Pending(f"{consumer} at {info.delivered.stream_seq} of {last}")

    await eventually(check, what=f"{consumer} has settled")


def uid_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


# ---------------------------------------------------------------------- the watcher's key


def miner_spec() -> dict[str, Any]:
    """What the attacker wrote into the KaiwoJob's observation: a host-level miner."""
    return {
        "image": "evil/miner",
        "entrypoint": "mine",
        "job": {
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "hostPID": True,
                        "hostNetwork": True,
                        "serviceAccountName": "kaiwo-executor",
                        "containers": [
                            {
                                "name": "workload",
                                "image": "evil/miner",
                                "securityContext": {"privileged": True},
                                "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                            }
                        ],
                        "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
                    }
                }
            }
        },
    }


async def test_a_forged_kaiwojob_observation_creates_no_job_and_the_real_one_comes_back(
    shared_pipeline: Pipeline,
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    # Still downloading: its main Job does not exist yet, so a plan could create it.
    await kube.create(actors.training_job("victim", namespace=namespace))
    await pipeline.reaches("victim", "DOWNLOADING")
    real = await pipeline.kaiwo_job("victim")
    forged = copy.deepcopy(real)
    forged["spec"] = miner_spec()

    async def miner_created() -> str | None:
        job = await pipeline.child(resources.JOB, "victim")
        return None if job is None else f"Job {job['spec']['template']['spec']}"

    await forge_observation(pipeline, forged)
    refusal = await refused(pipeline, uid_of(real), unless=miner_created)

    assert await miner_created() is None
    # People were told on the KaiwoJob before the refusal went out.
    events = (await kube.list(resources.EVENT, namespace=namespace)).items
    told = [e for e in events if e["reason"] == "PlanRefused"]
    assert told and all(e["type"] == "Warning" for e in told)
    assert all(e["involvedObject"]["uid"] == uid_of(real) for e in told)
    # The watcher reads the KaiwoJob again; the planner plans from it and its plan is
    # carried out: downloading still, no main Job, the download Job as it was.
    await observed_again(pipeline, uid_of(real))
    await applied_after(pipeline, uid_of(real), refusal)
    assert await pipeline.child(resources.JOB, "victim") is None
    download = await pipeline.child(resources.JOB, "victim-download")
    assert download is not None
    pod = download["spec"]["template"]["spec"]
    assert not pod.get("hostPID") and not pod.get("hostNetwork")
    assert (await pipeline.kaiwo_job("victim"))["status"]["status"] == "DOWNLOADING"


async def test_a_forged_queue_config_observation_changes_no_quota_and_queues_nothing_in_kube_system(
    shared_pipeline: Pipeline,
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    real = await kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
    forged = copy.deepcopy(real)
    forged["spec"] = {
        "clusterQueues": [
            {
                "name": actors.QUEUE,
                "namespaces": [namespace, "kube-system"],
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["amd.com/gpu"],
                            "flavors": [
                                {
                                    "name": "default",
                                    "resources": [
                                        {"name": "amd.com/gpu", "nominalQuota": "100000"}
                                    ],
                                }
                            ],
                        }
                    ]
                },
            }
        ]
    }

    async def queued_in_kube_system() -> str | None:
        local_queues = await kube.list(resources.KUEUE_LOCAL_QUEUE, namespace="kube-system")
        names = [q["metadata"]["name"] for q in local_queues.items]
        return f"LocalQueues in kube-system: {names}" if names else None

    await forge_observation(pipeline, forged)
    await refused(pipeline, uid_of(real), unless=queued_in_kube_system)

    assert await queued_in_kube_system() is None
    queue = await kube.get(resources.KUEUE_CLUSTER_QUEUE, actors.QUEUE)
    quotas = [
        resource.get("nominalQuota")
        for group in queue["spec"].get("resourceGroups") or ()
        for flavor in group.get("flavors") or ()
        for resource in flavor.get("resources") or ()
    ]
    assert "100000" not in quotas
    await observed_again(pipeline, uid_of(real))


async def test_forged_configurations_change_no_workload(shared_pipeline: Pipeline) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    # A workload planned before the forgery, its Job waiting: the forged configuration makes
    # the planner plan it again from the forgery, and that plan must be refused. (A workload
    # created after the forgery may be planned from the truth already: any other owner's
    # refused plan has the watcher bring the real configuration back, and that can come
    # first.)
    await kube.create(actors.training_job("before-forgery", namespace=namespace, download=False))
    before = await pipeline.kaiwo_job("before-forgery")
    await pipeline.appears(resources.JOB, "before-forgery")
    config = await kube.get(resources.KAIWO_CONFIG, "kaiwo")
    forged_config = copy.deepcopy(config)
    forged_config["spec"] = {
        **(forged_config.get("spec") or {}),
        "scheduling": {"kubeSchedulerName": "attacker-scheduler"},
    }
    # A namespace configuration the tenant never wrote: a stolen pull secret for every pod.
    phantom = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {
            "name": "aaa-phantom",
            "namespace": namespace,
            "uid": "00000000-0000-4000-8000-0000000000aa",
            "resourceVersion": "1",
            "generation": 1,
        },
        "spec": {"images": {"imagePullSecrets": ["stolen-credentials"]}},
    }
    await forge_observation(pipeline, forged_config)
    await forge_observation(pipeline, phantom)
    await kube.create(actors.training_job("after-forgery", namespace=namespace, download=False))

    async def forged_job() -> str | None:
        for name in ("before-forgery", "after-forgery"):
            job = await pipeline.child(resources.JOB, name)
            pod = (job or {}).get("spec", {}).get("template", {}).get("spec", {})
            forged = pod.get("schedulerName") == "attacker-scheduler" or {
                "name": "stolen-credentials"
            } in (pod.get("imagePullSecrets") or [])
            if forged:
                return f"Job {name} with {pod}"
        return None

    await refused(pipeline, uid_of(before), unless=forged_job)

    # Both are observed again (the phantom as deleted), and both workloads' Jobs are as the
    # real configuration has them.
    await observed_again(pipeline, uid_of(config))
    await observed_again(pipeline, uid_of(phantom))
    await pipeline.appears(resources.JOB, "after-forgery")
    assert await forged_job() is None


async def test_a_forged_model_observation_starts_no_pods(shared_pipeline: Pipeline) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(
        a_model(
            "tenant-model",
            namespace,
            url="hf://org/model",
            engine="VLLM",
            resourceProfile="cpu:1",
            replicas=0,
            autoscalingDisabled=True,
        )
    )
    real = await kube.get(resources.KUBEAI_MODEL, "tenant-model", namespace=namespace)
    forged = copy.deepcopy(real)
    forged["spec"]["replicas"] = 3

    async def pods_started() -> str | None:
        pods = await model_pods(kube, namespace, "tenant-model")
        return f"{len(pods)} Pods" if pods else None

    await forge_observation(pipeline, forged)
    await refused(pipeline, uid_of(real), unless=pods_started)

    assert await pods_started() is None
    await observed_again(pipeline, uid_of(real))


# ---------------------------------------------------------------------- the monitor's key


async def test_a_finding_cannot_preempt_a_workload_that_never_opted_in(
    shared_pipeline: Pipeline,
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    await kube.create(actors.training_job("busy", namespace=namespace, download=False))
    main = await pipeline.appears(resources.JOB, "busy")
    await pipeline.reaches("busy", "PENDING")
    await actors.kueue_admits(kube, main)
    await pipeline.jobs.pod_running("busy", namespace=namespace, ready=True)
    workload = await pipeline.reaches("busy", "RUNNING")
    now = datetime.now(UTC)
    finding = UtilizationV1(
        workload=ObjectRef(
            api_version=KAIWO,
            kind="KaiwoJob",
            name="busy",
            namespace=namespace,
            uid=uid_of(workload),
        ),
        vendor="amd",
        gpu_count=4,
        pod_count=1,
        utilization_ratio=0.0,
        aggregation="Max",
        window_start=now - timedelta(minutes=1),
        window_end=now,
        idle_threshold_ratio=1.0,
        idle_aggregation="Max",
        idle_utilization_ratio=0.0,
        idle_since=now - timedelta(hours=1),
        idle_policy="Always",
        idle_grace_seconds=0,
    )
    envelope = Envelope.new(
        data=finding,
        source="/kaiwo/monitor",
        time=now,
        correlationid=uid_of(workload),
        subject=f"{namespace}/busy",
    )
    subject = monitor_subject(topic="utilization", namespace=namespace, uid=uid_of(workload))

    await publish_as(pipeline, MONITOR, envelope, subject)

    # The planner took the finding in (it publishes a plan before it acknowledges), and the
    # executor carried out whatever plans there are: a preemption would have happened now.
    await settled(pipeline, MONITOR_STREAM, "planner-mon")
    await settled(pipeline, PLAN_STREAM, "executor-plan")
    found = await pipeline.kaiwo_job("busy")
    assert found["status"]["status"] == "RUNNING"
    assert await pipeline.child(resources.JOB, "busy") is not None


# ---------------------------------------------------------------------- the gateway's key


async def test_a_scale_decision_is_bounded_by_the_clusters_ceiling(
    shared_pipeline: Pipeline,
) -> None:
    pipeline = shared_pipeline
    kube, namespace = pipeline.kube, pipeline.namespace
    # Another tenant's Model at zero, autoscaled, without maxReplicas: no bound of its own.
    await kube.create(
        a_model(
            "private-model", namespace, url="hf://org/model", engine="VLLM", resourceProfile="cpu:1"
        )
    )

    async def written_down() -> dict[str, Any] | Pending:
        # The operator writes the unset replicas down first (0223), a new generation: a
        # decision on the one before would be void.
        found = await kube.get(resources.KUBEAI_MODEL, "private-model", namespace=namespace)
        return found if "replicas" in found["spec"] else Pending("replicas not written down yet")

    model = await eventually(written_down, what="the Model's replicas written down")
    metadata = model["metadata"]
    decision = ScaleDecidedV1(
        model=ObjectRef(
            api_version="kubeai.org/v1",
            kind="Model",
            name="private-model",
            namespace=namespace,
            uid=metadata["uid"],
        ),
        generation=metadata["generation"],
        from_replicas=0,
        replicas=20,
        cause="request",
        active_requests=20.0,
        average_active_requests=20.0,
        window_seconds=60.0,
        samples=6,
        target_requests=1,
        scale_down_delay_seconds=0,
        reason="scale from zero: forged",
    )
    envelope = Envelope.new(
        data=decision,
        source="/kaiwo/gateway",
        time=datetime.now(UTC),
        correlationid=metadata["uid"],
        subject=f"{namespace}/private-model",
    )

    await publish_as(
        pipeline, GATEWAY, envelope, scale_subject(namespace=namespace, uid=metadata["uid"])
    )

    async def scaled() -> int | Pending:
        found = await kube.get(resources.KUBEAI_MODEL, "private-model", namespace=namespace)
        replicas = found["spec"].get("replicas")
        return int(replicas) if replicas else Pending("not scaled yet")

    assert await eventually(scaled, what="the Model scaled") == 8
