"""Scenarios of the whole operator against the session's real API server (issue "Test against
a real Kubernetes API server"): what a user and an administrator do, and what the real
controllers (Job, Deployment, ReplicaSet, garbage collector, node lifecycle, namespace) do
around the operator. The tests play the kubelets, Kueue and the people.

Two operators serve the module, one after the other (class-scoped, so the first has stopped
and its cluster singletons are cleaned up before the second starts; two operators on one
cluster would fight over them):

* :class:`TestOnAGpuCluster`: the harness's GPU node and KaiwoQueueConfig, and a resync every
  :data:`RESYNC_SECONDS`. Its scenarios use their own workload names and leave what they
  changed of the cluster singletons as they found it (the taint scenario comes last: it
  turns GPU taints on, which changes every later pod template).
* :class:`TestWithTheExamples`: a cluster with nothing set up, the way ``kaiwo up`` meets a
  fresh one, then the project's examples.

The complete life of a download-gated GPU KaiwoJob is ``test_pipeline``'s; here it is measured
(writes per phase), not asserted again.

``-s`` prints the measured figures (``[measured] ...``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final

import pytest
import pytest_asyncio
import yaml
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_envtest import AuditEvent, AuditLog
from kaiwo_kube import resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    OPERATOR_USER,
    Pending,
    Pipeline,
    eventually,
    running_pipeline,
)
from tests.real_cluster import REPO_ROOT, RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
]

RESYNC_SECONDS: Final = 5.0
SLACK_SECONDS: Final = 5.0
QUIET_WINDOW_SECONDS: Final = 20.0
"""How long a settled operator is watched for writes: four of its resyncs."""
FIRST_JOB_WITHIN: Final = 30.0
EXAMPLES: Final = REPO_ROOT / "examples"
EXAMPLE_NAMESPACES: Final = ("ml-team", "nlp-research", "vision", "kubeai", "ml-prod")
ADMIN: Final = "cluster-admin"
OPERATOR_MANAGERS: Final = ("kaiwo", "kaiwo-create", "kaiwo-status")
HAND: Final = "kubectl-edit"
"""The field manager of an edit by hand (``kubectl edit``, ``kubectl patch``)."""

PLANNED: Final = "ai.silogen.kaiwo.plan.decided.v1"
GPU_TAINT: Final = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
MI300X_POOL: Final = "amd-mi300x-8gpu-115core-921gi"
"""The pool of a 128-core, 1 TiB, 8-GPU MI300X node: 90 % of 128 cores, 90 % of 1024 GiB."""
SMALL_MI300X_POOL: Final = "amd-mi300x-8gpu-57core-460gi"
"""The pool of a 64-core, 512 GiB, 8-GPU MI300X node."""


def measured(text: str) -> None:
    print(f"\n[measured] {text}")


async def kaiwo(*arguments: str) -> Any:
    """The ``kaiwo`` command, in a thread: it runs its own event loop."""
    env = {**os.environ, "COLUMNS": "250"}
    return await asyncio.to_thread(CliRunner().invoke, app, list(arguments), env=env)


def audit_of(pipeline: Pipeline) -> AuditLog:
    if pipeline.audit_log is None:
        pytest.skip("the API server's audit log exists only on the control plane tests start")
    return pipeline.audit_log


def operator_writes(pipeline: Pipeline, *, since: int) -> list[AuditEvent]:
    return [e for e in audit_of(pipeline).events(since=since) if e.user == OPERATOR_USER]


def audit_mark(pipeline: Pipeline) -> int | None:
    """Where the audit log stands, or None without one (its checks are then left out)."""
    return pipeline.audit_log.mark() if pipeline.audit_log is not None else None


OUTCOMES: Final = ("done", "stale (409)", "exists (409)", "other")


def outcome(event: AuditEvent) -> str:
    """Done (2xx); a 409 refusing a write made from a stale version (a precondition) or a
    create of what exists already; or anything else."""
    if 200 <= event.code < 300:
        return "done"
    if event.code == 409:
        return "exists (409)" if event.verb == "create" else "stale (409)"
    return "other"


def by_outcome(events: Iterable[AuditEvent]) -> dict[str, int]:
    counts = Counter(outcome(e) for e in events)
    return {key: counts[key] for key in OUTCOMES}


def write_lines(events: Iterable[AuditEvent]) -> str:
    counted = Counter(
        (e.verb, e.resource + (f"/{e.subresource}" if e.subresource else ""), e.code)
        for e in events
    )
    return ", ".join(f"{n}x {v} {r} {c}" for (v, r, c), n in sorted(counted.items()))


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    [found] = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found


def spec_fields_of_the_operator(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """What the operator's field managers own inside ``obj``'s spec (the empty spec of an
    object it created for the user owns nothing inside); ``kaiwo-apply`` is the CLI's, the
    user's."""
    return [
        (entry.get("fieldsV1") or {})["f:spec"]
        for entry in obj["metadata"].get("managedFields") or []
        if entry["manager"] in OPERATOR_MANAGERS and (entry.get("fieldsV1") or {}).get("f:spec")
    ]


async def settle(pipeline: Pipeline) -> None:
    """Every consumer idle and the store complete; then a moment for the API server to write
    the audit lines of the last requests it answered."""
    await pipeline.settled(within=60)
    await asyncio.sleep(1.0)


async def gone(
    pipeline: Pipeline, resource: resources.ResourceType, name: str, *, namespace: str | None
) -> None:
    async def check() -> bool | Pending:
        found = await actors.get_or_none(pipeline.kube, resource, name, namespace=namespace)
        return True if found is None else Pending("still there")

    await eventually(check, what=f"{resource.kind} {name} deleted")


async def plans_of(pipeline: Pipeline, uid: str) -> list[dict[str, Any]]:
    """The plans recorded for a workload, as recorded (``data`` of each PlanDecided)."""
    async with pipeline.store() as store:
        story = await store.read_stream(f"workload/{uid}")
    return [e.data for e in story if e.type == PLANNED]


@pytest_asyncio.fixture(scope="class", loop_scope="module")
async def gpu_cluster(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with running_pipeline(
        tmp_path_factory.mktemp("kaiwo"),
        real=real_cluster,
        service_env={"KAIWO_RESYNC_EVERY_SECONDS": f"{RESYNC_SECONDS:g}"},
    ) as running:
        yield running


@pytest_asyncio.fixture(scope="class", loop_scope="module")
async def fresh_cluster(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with running_pipeline(
        tmp_path_factory.mktemp("kaiwo"),
        real=real_cluster,
        service_env={"KAIWO_RESYNC_EVERY_SECONDS": f"{RESYNC_SECONDS:g}"},
        gpu_cluster=False,
    ) as running:
        yield running


# ---------------------------------------------------------------------- manifests


def kaiwo_service(name: str, *, namespace: str, image: str) -> dict[str, Any]:
    """A Deployment-based KaiwoService on one GPU (no Ray, no download)."""
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": image, "entrypoint": "python serve.py", "gpus": 1},
    }


def admins_queue_config(namespace: str, *, gpu_quota: int, team_b: bool) -> dict[str, Any]:
    """The administrator's KaiwoQueueConfig: queue ``kaiwo`` with a quota on the discovered
    pool, and optionally a second queue ``team-b``."""

    def group(gpus: int) -> dict[str, Any]:
        return {
            "coveredResources": ["cpu", "memory", "amd.com/gpu"],
            "flavors": [
                {
                    "name": MI300X_POOL,
                    "resources": [
                        {"name": "cpu", "nominalQuota": "64"},
                        {"name": "memory", "nominalQuota": "512Gi"},
                        {"name": "amd.com/gpu", "nominalQuota": str(gpus)},
                    ],
                }
            ],
        }

    queues = [
        {
            "name": actors.QUEUE,
            "namespaces": [namespace],
            "spec": {"resourceGroups": [group(gpu_quota)]},
        }
    ]
    if team_b:
        queues.append(
            {
                "name": "team-b",
                "namespaces": [namespace],
                "spec": {"cohort": "research", "resourceGroups": [group(2)]},
            }
        )
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": {"clusterQueues": queues},
    }


def quota(gpus: int) -> list[dict[str, Any]]:
    """ClusterQueue ``resourceGroups`` of :func:`admins_queue_config` as Kueue holds them."""
    return [
        {
            "coveredResources": ["cpu", "memory", "amd.com/gpu"],
            "flavors": [
                {
                    "name": MI300X_POOL,
                    "resources": [
                        {"name": "cpu", "nominalQuota": "64"},
                        {"name": "memory", "nominalQuota": "512Gi"},
                        {"name": "amd.com/gpu", "nominalQuota": str(gpus)},
                    ],
                }
            ],
        }
    ]


# ---------------------------------------------------------------------- one operator, a GPU node


class TestOnAGpuCluster:
    async def test_the_writes_a_download_gated_kaiwojob_costs(self, gpu_cluster: Pipeline) -> None:
        """Measured, not bounded: the operator's write requests for one KaiwoJob with a data
        download, until PENDING and from there until COMPLETE. Only its own namespace is
        written to, and nothing is refused but as stale (a status planned from an older
        version of the KaiwoJob) or as existing already (a create asked by a resync that ran
        while the object was on its way: this operator resyncs every 5 s)."""
        pipeline, name = gpu_cluster, "measured"
        ns = pipeline.namespace
        await settle(pipeline)  # the queue config's objects made, the operator idle
        start = audit_of(pipeline).mark()
        await pipeline.kube.create(actors.training_job(name, namespace=ns))
        await pipeline.reaches(name, "DOWNLOADING")
        await pipeline.appears(resources.JOB, f"{name}-download")
        await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
        main = await pipeline.appears(resources.JOB, name)
        await pipeline.reaches(name, "PENDING")
        await settle(pipeline)
        to_pending = operator_writes(pipeline, since=start)
        pending_mark = audit_of(pipeline).mark()

        await actors.kueue_admits(pipeline.kube, main)
        await pipeline.jobs.pod_running(name, namespace=ns, ready=False)
        await pipeline.reaches(name, "STARTING")
        await pipeline.jobs.pod_running(name, namespace=ns, ready=True)
        await pipeline.reaches(name, "RUNNING")
        await pipeline.jobs.pod_succeeded(name, namespace=ns)
        await pipeline.reaches(name, "COMPLETE")
        await settle(pipeline)
        to_complete = operator_writes(pipeline, since=pending_mark)

        windows = (
            ("created to PENDING", to_pending),
            ("PENDING to COMPLETE", to_complete),
            ("created to COMPLETE", to_pending + to_complete),
        )
        for window, writes in windows:
            here = [e for e in writes if e.namespace == ns]
            measured(
                f"writes {window}: {by_outcome(here)} in its namespace "
                f"({write_lines(here)}); elsewhere: "
                f"{write_lines(e for e in writes if e.namespace != ns) or 'none'}"
            )
        everything = to_pending + to_complete
        assert {(e.namespace, e.code) for e in everything if e.namespace != ns} == set()
        assert by_outcome(everything)["other"] == 0, write_lines(everything)

    async def test_a_kaiwoservice_rolls_out_a_new_image(self, gpu_cluster: Pipeline) -> None:
        pipeline, name = gpu_cluster, "chat"
        ns = pipeline.namespace
        await pipeline.kube.create(
            kaiwo_service(name, namespace=ns, image="ghcr.io/example/chat:1.0")
        )

        deployment = await pipeline.appears(resources.DEPLOYMENT, name)
        service = await pipeline.reaches(name, "PENDING", kind=resources.KAIWO_SERVICE)
        uid = service["metadata"]["uid"]
        template = deployment["spec"]["template"]
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["selector"] == {"matchLabels": {"app": name}}
        assert template["metadata"]["labels"] == {
            "app": name,
            "kaiwo.silogen.ai/name": name,
            "kaiwo.silogen.ai/run-id": uid,
            "kaiwo.silogen.ai/type": "service",
            "kaiwo.silogen.ai/user": "",
            "kueue.x-k8s.io/queue-name": "kaiwo",
        }
        pod = template["spec"]
        assert (pod["schedulerName"], pod["restartPolicy"]) == ("kaiwo-scheduler", "Always")
        assert pod["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}
        assert pod["volumes"] == [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}
        ]
        [container] = pod["containers"]
        assert {
            key: container[key]
            for key in ("name", "image", "imagePullPolicy", "command", "env", "resources")
        } == {
            "name": "workload",
            "image": "ghcr.io/example/chat:1.0",
            "imagePullPolicy": "Always",
            "command": ["/bin/sh", "-c", "python serve.py"],
            "env": [
                {"name": "NUM_GPUS", "value": "1"},
                {"name": "NUM_REPLICAS", "value": "1"},
                {"name": "NUM_GPUS_PER_REPLICA", "value": "1"},
            ],
            "resources": {
                "limits": {"cpu": "4", "memory": "32Gi", "amd.com/gpu": "1"},
                "requests": {"cpu": "4", "memory": "32Gi", "amd.com/gpu": "1"},
            },
        }
        assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]

        # The ReplicaSet controller made the pod; its kubelet reports it Ready.
        kubelet = pipeline.jobs
        assert isinstance(kubelet, actors.Kubelet)
        [first_pod] = await kubelet.deployment_pods_ready(name, namespace=ns)
        service = await pipeline.reaches(name, "READY", kind=resources.KAIWO_SERVICE)
        assert service["status"]["startTime"]
        assert condition(service, "Admitted")["status"] == "True"

        # A new image: the Deployment's template changes, a new ReplicaSet rolls it out.
        await pipeline.kube.merge_patch(
            resources.KAIWO_SERVICE,
            name,
            {"spec": {"image": "ghcr.io/example/chat:1.1"}},
            namespace=ns,
            field_manager=HAND,
        )

        async def new_template() -> dict[str, Any] | Pending:
            found = await pipeline.child(resources.DEPLOYMENT, name)
            assert found is not None
            [c] = found["spec"]["template"]["spec"]["containers"]
            return found if c["image"] == "ghcr.io/example/chat:1.1" else Pending(c["image"])

        rolled = await eventually(new_template, what="the Deployment runs the new image")
        assert rolled["metadata"]["generation"] == 2
        [second_pod] = await kubelet.deployment_pods_ready(name, namespace=ns)
        assert second_pod["metadata"]["name"] != first_pod["metadata"]["name"]

        async def rolled_out() -> dict[str, Any] | Pending:
            found = await pipeline.child(resources.DEPLOYMENT, name)
            assert found is not None
            status = found.get("status") or {}
            counts = {
                key: status.get(key)
                for key in (
                    "observedGeneration",
                    "replicas",
                    "updatedReplicas",
                    "availableReplicas",
                )
            }
            done = {
                "observedGeneration": 2,
                "replicas": 1,
                "updatedReplicas": 1,
                "availableReplicas": 1,
            }
            return found if counts == done else Pending(str(counts))

        await eventually(rolled_out, what="the rollout completes (the old pod gone)")
        service = await pipeline.reaches(name, "READY", kind=resources.KAIWO_SERVICE)
        assert service["status"]["observedGeneration"] == 2
        pods = await pipeline.kube.list(resources.POD, namespace=ns, label_selector=f"app={name}")
        images = [
            (p["metadata"]["name"], c["image"])
            for p in pods.items
            if "deletionTimestamp" not in p["metadata"]
            for c in p["spec"]["containers"]
        ]
        assert images == [(second_pod["metadata"]["name"], "ghcr.io/example/chat:1.1")]

    async def test_a_queue_config_change_reaches_kueue_and_stays_the_admins(
        self, gpu_cluster: Pipeline
    ) -> None:
        pipeline, kube = gpu_cluster, gpu_cluster.kube
        ns = pipeline.namespace
        start = audit_mark(pipeline)

        async def cluster_queue_quota(name: str, gpus: int) -> None:
            async def check() -> bool | Pending:
                found = await actors.get_or_none(
                    kube, resources.KUEUE_CLUSTER_QUEUE, name, namespace=None
                )
                if found is None:
                    return Pending("absent")
                groups = found["spec"].get("resourceGroups")
                return True if groups == quota(gpus) else Pending(f"resourceGroups {groups}")

            await eventually(check, what=f"ClusterQueue {name} with {gpus} GPUs")

        try:
            await kube.apply(
                admins_queue_config(ns, gpu_quota=4, team_b=False), field_manager=ADMIN, force=False
            )
            await cluster_queue_quota(actors.QUEUE, 4)

            # A bigger quota and a second queue: both reach Kueue.
            await kube.apply(
                admins_queue_config(ns, gpu_quota=8, team_b=True), field_manager=ADMIN, force=False
            )
            await cluster_queue_quota(actors.QUEUE, 8)
            await cluster_queue_quota("team-b", 2)
            team_b = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "team-b")
            assert (team_b["spec"]["cohort"], team_b["spec"]["namespaceSelector"]) == (
                "research",
                {},
            )
            local = await pipeline.appears(resources.KUEUE_LOCAL_QUEUE, "team-b")
            assert local["spec"] == {"clusterQueue": "team-b", "stopPolicy": "None"}

            # The second queue removed: its ClusterQueue and LocalQueue are pruned.
            manifest = admins_queue_config(ns, gpu_quota=8, team_b=False)
            await kube.apply(manifest, field_manager=ADMIN, force=False)
            await gone(pipeline, resources.KUEUE_CLUSTER_QUEUE, "team-b", namespace=None)
            await gone(pipeline, resources.KUEUE_LOCAL_QUEUE, "team-b", namespace=ns)
            await cluster_queue_quota(actors.QUEUE, 8)
            await settle(pipeline)

            # The spec is the administrator's alone: the operator wrote only its status, so
            # re-applying the unchanged manifest without force succeeds.
            queue_config = await kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
            assert spec_fields_of_the_operator(queue_config) == []
            if start is not None:
                writes = [
                    (e.verb, e.subresource)
                    for e in operator_writes(pipeline, since=start)
                    if e.resource == "kaiwoqueueconfigs"
                ]
                assert {subresource for _, subresource in writes} <= {"status"}, writes
            # (Not a no-op for the server: the atomic clusterQueues list it holds carries the
            # schema's defaults, so the apply's timestamp moves. Only no conflict matters.)
            again = await kube.apply(manifest, field_manager=ADMIN, force=False)
            assert condition(again, "Ready")["status"] == "True"
        finally:
            # The harness's own again, for the scenarios after this one.
            await actors.create_queue_config(kube, namespace=ns)
            await cluster_queue_quota_cleared(pipeline)

    async def test_an_invalid_spec_is_reported_and_makes_no_child(
        self, gpu_cluster: Pipeline
    ) -> None:
        """The CRD has no rule across a secret reference's two fields; the models have."""
        pipeline, name = gpu_cluster, "half-secret"
        ns = pipeline.namespace
        job = actors.training_job(name, namespace=ns)
        [source] = job["spec"]["storage"]["data"]["download"]["s3"]
        source["accessKeyId"] = {"secretName": "minio"}  # no secretKey
        await pipeline.kube.create(job)

        created = await pipeline.reaches(name, "ERROR")
        uid = created["metadata"]["uid"]
        message = (
            "The spec is invalid, nothing was changed: "
            "spec.storage.data.download.s3[0].accessKeyId: secretName and secretKey must be "
            "given together (the Secret and its key)"
        )
        valid = condition(created, "Valid")
        assert (valid["status"], valid["reason"], valid["message"]) == (
            "False",
            "InvalidSpec",
            message,
        )

        async def warning() -> dict[str, Any] | Pending:
            events = await pipeline.kube.list(
                resources.EVENT, namespace=ns, field_selector=f"involvedObject.uid={uid}"
            )
            found = [e for e in events.items if e["reason"] == "InvalidSpec"]
            return found[0] if found else Pending("no InvalidSpec Event yet")

        event = await eventually(warning, what="a Warning Event on the KaiwoJob")
        assert (event["type"], event["message"]) == ("Warning", message)
        assert {
            key: event["involvedObject"][key] for key in ("apiVersion", "kind", "name", "namespace")
        } == {"apiVersion": actors.KAIWO_API, "kind": "KaiwoJob", "name": name, "namespace": ns}
        await settle(pipeline)
        selector = f"{actors.OWNER_UID_LABEL}={uid}"
        for kind in (resources.JOB, resources.CONFIG_MAP, resources.PERSISTENT_VOLUME_CLAIM):
            assert (
                await pipeline.kube.list(kind, namespace=ns, label_selector=selector)
            ).items == []

        # Fixed: the spec turns valid and the workload starts with its download.
        source["accessKeyId"] = {"secretName": "minio", "secretKey": "access-key"}
        await pipeline.kube.merge_patch(
            resources.KAIWO_JOB,
            name,
            {"spec": {"storage": job["spec"]["storage"]}},
            namespace=ns,
            field_manager=HAND,
        )
        fixed = await pipeline.reaches(name, "DOWNLOADING")
        valid = condition(fixed, "Valid")
        assert (valid["status"], valid["reason"], valid["message"]) == (
            "True",
            "ValidSpec",
            "The spec is valid",
        )
        await pipeline.appears(resources.JOB, f"{name}-download")

    async def test_drift_is_undone_within_a_resync(self, gpu_cluster: Pipeline) -> None:
        pipeline, name = gpu_cluster, "drifting"
        ns, kube = pipeline.namespace, gpu_cluster.kube
        await kube.create(actors.training_job(name, namespace=ns))
        job = await pipeline.reaches(name, "DOWNLOADING")
        script = await pipeline.appears(resources.CONFIG_MAP, f"{name}-download")
        download = await pipeline.appears(resources.JOB, f"{name}-download")
        assert download["spec"]["parallelism"] == 1
        original = script["data"]["config.yaml"]
        await settle(pipeline)

        # Edited by hand, under another field manager.
        await kube.merge_patch(
            resources.CONFIG_MAP,
            f"{name}-download",
            {"data": {"config.yaml": "edited: by hand\n"}},
            namespace=ns,
            field_manager=HAND,
        )
        await kube.merge_patch(
            resources.JOB,
            f"{name}-download",
            {"spec": {"parallelism": 3}},
            namespace=ns,
            field_manager=HAND,
        )
        edited = time.monotonic()

        async def restored() -> bool | Pending:
            config = await kube.get(resources.CONFIG_MAP, f"{name}-download", namespace=ns)
            found = await kube.get(resources.JOB, f"{name}-download", namespace=ns)
            if config["data"]["config.yaml"] != original:
                return Pending("the ConfigMap still holds the edit")
            if found["spec"]["parallelism"] != 1:
                return Pending(f"parallelism {found['spec']['parallelism']}")
            return True

        await eventually(restored, what="both edits undone", within=RESYNC_SECONDS + SLACK_SECONDS)
        measured(f"drift undone {time.monotonic() - edited:.1f} s after the edits")
        await settle(pipeline)
        drifted = {
            (ref["kind"], ref["name"])
            for plan in await plans_of(pipeline, job["metadata"]["uid"])
            for ref in plan.get("drifted") or []
        }
        assert drifted == {("ConfigMap", f"{name}-download"), ("Job", f"{name}-download")}

    async def test_a_spec_edit_after_the_download_leaves_its_job_as_it_ran(
        self, gpu_cluster: Pipeline
    ) -> None:
        """A Job's pod template cannot change, and the download Job carries the workload's
        env: an edit of ``spec.env`` once the download Job exists must not be applied to it
        (the API server would refuse it on every plan: ``ApplyRefused`` for good). The
        workload's own Job, still waiting for admission, is replaced to take the edit."""
        pipeline, name = gpu_cluster, "edited-after-download"
        ns, kube = pipeline.namespace, gpu_cluster.kube
        await kube.create(actors.training_job(name, namespace=ns))
        await pipeline.reaches(name, "DOWNLOADING")
        ran = await pipeline.appears(resources.JOB, f"{name}-download")
        await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
        waiting = await pipeline.appears(resources.JOB, name)
        await pipeline.reaches(name, "PENDING")

        await kube.merge_patch(
            resources.KAIWO_JOB,
            name,
            {"spec": {"env": [{"name": "LEARNING_RATE", "value": "0.1"}]}},
            namespace=ns,
            field_manager=HAND,
        )
        await settle(pipeline)

        job = await kube.get(resources.KAIWO_JOB, name, namespace=ns)
        types = [c["type"] for c in job["status"]["conditions"]]
        assert "ApplyRefused" not in types, job["status"]["conditions"]
        assert condition(job, "DownloadJobSucceeded")["status"] == "True"
        download = await kube.get(resources.JOB, f"{name}-download", namespace=ns)
        assert download["spec"]["template"] == ran["spec"]["template"]

        # The workload's own Job still waited for admission (no Kueue admits it here), so it
        # is replaced by one of the edited spec, which takes the edit (decision 0129).
        async def replaced() -> dict[str, Any] | Pending:
            found = await actors.get_or_none(kube, resources.JOB, name, namespace=ns)
            if found is None or found["metadata"]["uid"] == waiting["metadata"]["uid"]:
                return Pending("the Job of the earlier spec, or none yet")
            return found

        main = await eventually(replaced, what="the waiting Job replaced")
        env = main["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "LEARNING_RATE", "value": "0.1"} in env
        assert main["spec"]["suspend"] is True
        await settle(pipeline)
        job = await kube.get(resources.KAIWO_JOB, name, namespace=ns)
        applied = condition(job, "ChildSpecApplied")
        assert (applied["status"], applied["reason"]) == ("True", "Applied")
        assert job["status"]["status"] == "PENDING"

    async def test_a_storage_edit_leaves_the_claim_as_made_and_says_so(
        self, gpu_cluster: Pipeline
    ) -> None:
        """A claim's class and access modes cannot change, nor can its size shrink: an edit
        of them once the claim exists is not applied (the API server would refuse it on
        every plan), and a Warning Event names what was not."""
        pipeline, name = gpu_cluster, "reclassed"
        ns, kube = pipeline.namespace, gpu_cluster.kube
        created = await kube.create(actors.training_job(name, namespace=ns))
        uid = created["metadata"]["uid"]
        await pipeline.reaches(name, "DOWNLOADING")
        made = await pipeline.appears(resources.PERSISTENT_VOLUME_CLAIM, f"{name}-data")
        await settle(pipeline)

        await kube.merge_patch(
            resources.KAIWO_JOB,
            name,
            {"spec": {"storage": {"storageClassName": "premium", "accessMode": "ReadWriteMany"}}},
            namespace=ns,
            field_manager=HAND,
        )
        await settle(pipeline)

        job = await kube.get(resources.KAIWO_JOB, name, namespace=ns)
        types = [c["type"] for c in job["status"]["conditions"]]
        assert "ApplyRefused" not in types, job["status"]["conditions"]
        claim = await kube.get(resources.PERSISTENT_VOLUME_CLAIM, f"{name}-data", namespace=ns)
        assert claim["spec"]["storageClassName"] == "standard"
        assert claim["spec"]["accessModes"] == made["spec"]["accessModes"] == ["ReadWriteOnce"]
        events = await kube.list(
            resources.EVENT, namespace=ns, field_selector=f"involvedObject.uid={uid}"
        )
        notes = [e["message"] for e in events.items if e["reason"] == "SettingsIgnored"]
        assert notes == [
            f"Not applied to the existing claim {name}-data, because a claim's access modes "
            "and storage class cannot change after it is created, nor can its size shrink: "
            "spec.accessModes, spec.storageClassName. Delete and re-create the workload to "
            "use them."
        ]

    async def test_a_data_volume_made_anew_is_downloaded_into_again(
        self, gpu_cluster: Pipeline
    ) -> None:
        """Someone deletes the data claim of a KaiwoJob whose download succeeded and whose Job
        waits for admission (no pod uses the claim: it goes at once). The operator makes a
        new, empty claim; before decision 0140 the finished download Job still said the data
        was there, and the Job's pods would have started on the empty volume."""
        pipeline, name = gpu_cluster, "redownloaded"
        ns, kube = pipeline.namespace, gpu_cluster.kube
        created = await kube.create(actors.training_job(name, namespace=ns))
        await pipeline.reaches(name, "DOWNLOADING")
        first = await pipeline.appears(resources.JOB, f"{name}-download")
        await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
        await pipeline.appears(resources.JOB, name)
        await pipeline.reaches(name, "PENDING")
        await settle(pipeline)
        old = await kube.get(resources.PERSISTENT_VOLUME_CLAIM, f"{name}-data", namespace=ns)
        first = await kube.get(resources.JOB, f"{name}-download", namespace=ns)
        assert first["metadata"]["annotations"]["kaiwo.silogen.ai/downloaded-into"] == (
            f'{{"{name}-data": "{old["metadata"]["uid"]}"}}'
        )

        await kube.delete(resources.PERSISTENT_VOLUME_CLAIM, f"{name}-data", namespace=ns)

        async def new_download() -> dict[str, Any] | Pending:
            found = await actors.get_or_none(kube, resources.JOB, f"{name}-download", namespace=ns)
            if found is None or found["metadata"]["uid"] == first["metadata"]["uid"]:
                return Pending("the first download Job, or none yet")
            return found

        again = await eventually(new_download, what="a new download Job")
        claim = await kube.get(resources.PERSISTENT_VOLUME_CLAIM, f"{name}-data", namespace=ns)
        assert claim["metadata"]["uid"] != old["metadata"]["uid"]
        assert again["metadata"]["annotations"]["kaiwo.silogen.ai/downloaded-into"] == (
            f'{{"{name}-data": "{claim["metadata"]["uid"]}"}}'
        )
        await pipeline.reaches(name, "DOWNLOADING")
        # The Job waits for the download into the new claim: deleted, not yet made again.
        assert await actors.get_or_none(kube, resources.JOB, name, namespace=ns) is None
        events = await kube.list(
            resources.EVENT,
            namespace=ns,
            field_selector=f"involvedObject.uid={created['metadata']['uid']}",
        )
        assert [e["message"] for e in events.items if e["reason"] == "VolumeMadeAnew"] == [
            f"PersistentVolumeClaim {name}-data the download filled was deleted: the download "
            "runs again into the new, empty one before the workload's pods start"
        ]

        await pipeline.jobs.pod_succeeded(f"{name}-download", namespace=ns)
        await pipeline.appears(resources.JOB, name)
        await pipeline.reaches(name, "PENDING")
        await settle(pipeline)
        job = await kube.get(resources.KAIWO_JOB, name, namespace=ns)
        assert condition(job, "DownloadJobSucceeded")["status"] == "True"

    async def test_taints_and_labels_of_others_survive(self, gpu_cluster: Pipeline) -> None:
        """Last of its class: GPU taints stay on the nodes (Kaiwo never removes its taint)."""
        pipeline, kube = gpu_cluster, gpu_cluster.kube
        node = actors.GpuNode("gpu-node-2")
        config = {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": actors.KAIWO_CONFIG},
            "spec": {"nodes": {"addTaintsToGpuNodes": True}},
        }
        admins_taint = {
            "key": "example.com/maintenance",
            "value": "planned",
            "effect": "NoSchedule",
        }
        kaiwo_labels = {
            "kaiwo/nodepool": MI300X_POOL,
            "kaiwo/worker": "true",
            "kaiwo/gpu-model": "mi300x",
            "kaiwo/topology-block": "block-a",
            "kaiwo/topology-rack": "rack-a",
        }
        kubelet_labels = {
            "kubernetes.io/hostname": node.name,
            "amd.com/gpu.product-name": actors.MI300X,
            "beta.amd.com/gpu.family.AI": "8",
            actors.TEST_NODE_LABEL: "true",
        }
        await kube.apply(config, field_manager=ADMIN, force=False)
        await actors.register_node(
            kube, node, not_ready_taint=True, status_after=actors.STATUS_AFTER_SECONDS
        )

        async def node_holds(taints: list[dict[str, Any]], labels: dict[str, str]) -> None:
            async def check() -> bool | Pending:
                found = await kube.get(resources.NODE, node.name)
                held = [
                    {k: t[k] for k in ("key", "value", "effect") if k in t}
                    for t in found["spec"].get("taints") or []
                ]
                if sorted(held, key=str) != sorted(taints, key=str):
                    return Pending(f"taints {held}")
                if found["metadata"]["labels"] != labels:
                    return Pending(f"labels {found['metadata']['labels']}")
                return True

            await eventually(check, what=f"node {node.name} with {taints} and {labels}")

        # Kaiwo's labels and taint; the lifecycle controller took its not-ready taint away.
        await node_holds([GPU_TAINT], {**kubelet_labels, **kaiwo_labels})

        def add_admins(found: dict[str, Any]) -> dict[str, Any]:
            return {
                "metadata": {"labels": {"example.com/team": "nlp"}},
                "spec": {"taints": [*(found["spec"].get("taints") or []), admins_taint]},
            }

        await actors.edit_node(kube, node.name, add_admins)
        await settle(pipeline)
        everyone = {**kubelet_labels, **kaiwo_labels, "example.com/team": "nlp"}
        await node_holds([GPU_TAINT, admins_taint], everyone)

        # The admin removes their taint again: the operator does not put it back, not even
        # at its next resync.
        def remove_admins(found: dict[str, Any]) -> dict[str, Any]:
            taints = [t for t in found["spec"]["taints"] if t["key"] != admins_taint["key"]]
            return {"spec": {"taints": taints}}

        await actors.edit_node(kube, node.name, remove_admins)
        removed = audit_mark(pipeline)
        await asyncio.sleep(RESYNC_SECONDS + 1)
        await settle(pipeline)
        await node_holds([GPU_TAINT], everyone)
        if removed is not None:
            node_writes = [
                e for e in operator_writes(pipeline, since=removed) if e.resource == "nodes"
            ]
            assert node_writes == []


async def cluster_queue_quota_cleared(pipeline: Pipeline) -> None:
    """ClusterQueue ``kaiwo`` back to the harness's (no quota of its own)."""

    async def check() -> bool | Pending:
        found = await pipeline.kube.get(resources.KUEUE_CLUSTER_QUEUE, actors.QUEUE)
        groups = found["spec"].get("resourceGroups")
        return True if not groups else Pending(f"resourceGroups {groups}")

    await eventually(check, what="ClusterQueue kaiwo without quota")


# ---------------------------------------------------------------------- a fresh cluster, examples


def example_nodes() -> tuple[actors.GpuNode, ...]:
    """Three 8-GPU nodes: two of one pool, one smaller of a pool of its own."""
    return (
        actors.GpuNode("mi300x-a"),
        actors.GpuNode("mi300x-b"),
        actors.GpuNode("mi300x-small", cpu="64", memory="512Gi"),
    )


def default_queue(flavors: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """The generated ClusterQueue's ``resourceGroups`` for (flavor, cpu, memory, GPUs)."""
    return [
        {
            "coveredResources": ["cpu", "memory", "amd.com/gpu"],
            "flavors": [
                {
                    "name": flavor,
                    "resources": [
                        {"name": "cpu", "nominalQuota": cpu},
                        {"name": "memory", "nominalQuota": memory},
                        {"name": "amd.com/gpu", "nominalQuota": gpus},
                    ],
                }
                for flavor, cpu, memory, gpus in flavors
            ],
        }
    ]


class TestWithTheExamples:
    async def test_kaiwo_up_to_the_first_job_on_a_fresh_cluster(
        self, fresh_cluster: Pipeline
    ) -> None:
        """Nothing set up: the operator makes the default KaiwoConfig and KaiwoQueueConfig
        itself, and a KaiwoJob created as soon as it is ready gets its Job."""
        pipeline, name = fresh_cluster, "first"
        ns = pipeline.namespace
        job = actors.training_job(name, namespace=ns, download=False)
        job["spec"]["gpus"] = 0
        await pipeline.kube.create(job)
        created = time.monotonic()
        main = await pipeline.appears(resources.JOB, name, within=FIRST_JOB_WITHIN)
        arrived = time.monotonic()
        measured(
            f"kaiwo up ready after {pipeline.ready_at - pipeline.started_at:.1f} s; first Job "
            f"{arrived - pipeline.started_at:.1f} s after kaiwo up began, "
            f"{arrived - created:.1f} s after its KaiwoJob was created"
        )
        assert arrived - pipeline.started_at < FIRST_JOB_WITHIN
        assert main["spec"]["suspend"] is True
        assert main["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
        local = await pipeline.appears(resources.KUEUE_LOCAL_QUEUE, actors.QUEUE)
        assert local["spec"] == {"clusterQueue": "kaiwo", "stopPolicy": "None"}
        await pipeline.kube.delete(resources.KAIWO_JOB, name, namespace=ns)
        await gone(pipeline, resources.JOB, name, namespace=ns)

    async def test_a_settled_cluster_makes_no_writes(
        self, fresh_cluster: Pipeline, real_cluster: RealCluster
    ) -> None:
        pipeline, kube = fresh_cluster, fresh_cluster.kube
        audit = audit_of(pipeline)
        for namespace in ("ml-team", "nlp-research", "vision"):
            await actors.create_namespace(kube, namespace)
        applied = await kaiwo(
            "apply",
            "-f",
            str(EXAMPLES / "kaiwoconfig.yaml"),
            "-f",
            str(EXAMPLES / "kaiwoqueueconfig.yaml"),
            "--kubeconfig",
            str(real_cluster.kubeconfig),
        )
        assert applied.exit_code == 0, applied.output
        nodes = example_nodes()
        await asyncio.gather(
            *(
                actors.register_node(
                    kube, node, not_ready_taint=True, status_after=actors.STATUS_AFTER_SECONDS
                )
                for node in nodes
            )
        )

        both = default_queue(
            [
                (SMALL_MI300X_POOL, "57", "460Gi", "8"),
                (MI300X_POOL, "230", "1842Gi", "16"),
            ]
        )
        await queue_holds(pipeline, both)
        for flavor in ("amd-mi300x-8gpu", "cpu-only", MI300X_POOL, SMALL_MI300X_POOL):
            await pipeline.appears(resources.KUEUE_RESOURCE_FLAVOR, flavor)
        for node in nodes:
            await node_is_kaiwos(pipeline, node)
        await settle(pipeline)

        writes = await pipeline.operator_writes_while_idle(QUIET_WINDOW_SECONDS)
        measured(
            f"operator writes in a {QUIET_WINDOW_SECONDS:g} s quiet window: {sum(writes.values())}"
        )
        assert writes == Counter()

        # No node was ever taken for a pool before its kubelet reported its capacity.
        zero_pools = [
            (e.verb, e.name)
            for e in audit.events()
            if e.resource == "resourceflavors" and e.name.endswith("-0core-0gi")
        ]
        assert zero_pools == []
        async with pipeline.store() as store:
            plans = await store.read_by_type([PLANNED])
        planned_flavors = {
            manifest["metadata"]["name"]
            for plan in plans
            for manifest in plan.data["plan"].get("desired") or []
            if manifest["kind"] == "ResourceFlavor"
        }
        assert planned_flavors == {"amd-mi300x-8gpu", "cpu-only", MI300X_POOL, SMALL_MI300X_POOL}

        # The small node leaves: its flavor goes, and the default queue's quota follows.
        await actors.remove_node(kube, "mi300x-small")
        await gone(pipeline, resources.KUEUE_RESOURCE_FLAVOR, SMALL_MI300X_POOL, namespace=None)
        await queue_holds(pipeline, default_queue([(MI300X_POOL, "230", "1842Gi", "16")]))

    async def test_every_example_applies_again_without_conflict(
        self, fresh_cluster: Pipeline, real_cluster: RealCluster
    ) -> None:
        pipeline = fresh_cluster
        for namespace in EXAMPLE_NAMESPACES:
            await actors.create_namespace(pipeline.kube, namespace)
        # The two big nodes (16 GPUs, what the Ray example asks for), unless registered before.
        for node in example_nodes()[:2]:
            if await actors.get_or_none(pipeline.kube, resources.NODE, node.name, namespace=None):
                continue
            await actors.register_node(pipeline.kube, node, not_ready_taint=True)
        arguments = ("apply", "-f", str(EXAMPLES), "--kubeconfig", str(real_cluster.kubeconfig))
        first = await kaiwo(*arguments)
        assert first.exit_code == 0, first.output

        phases = {
            (resources.KAIWO_JOB, "ml-team", "llama-3-8b-sft"): "DOWNLOADING",
            (resources.KAIWO_JOB, "vision", "batch-inference-ray"): "DOWNLOADING",
            (resources.KAIWO_SERVICE, "ml-team", "qwen-chat"): "DOWNLOADING",
            (resources.KAIWO_SERVICE, "ml-team", "llm-serve"): "DOWNLOADING",
        }

        async def acted_on() -> bool | Pending:
            found = {}
            for kind, namespace, name in phases:
                obj = await pipeline.kube.get(kind, name, namespace=namespace)
                found[(kind, namespace, name)] = (obj.get("status") or {}).get("status")
            return True if found == phases else Pending(str(found))

        await eventually(acted_on, what="every example workload planned", within=60)
        await settle(pipeline)

        again = await kaiwo(*arguments)
        assert again.exit_code == 0, again.output
        assert "conflict" not in again.output.lower()
        # Every example's spec is still the user's alone.
        for path in sorted(EXAMPLES.glob("*.yaml")):
            for document in yaml.safe_load_all(path.read_text()):
                kind = resources.known_type(document["apiVersion"], document["kind"])
                assert kind is not None, document["kind"]
                metadata = document["metadata"]
                stored = await pipeline.kube.get(
                    kind, metadata["name"], namespace=metadata.get("namespace")
                )
                assert spec_fields_of_the_operator(stored) == [], f"{path.name}: {metadata}"


async def queue_holds(pipeline: Pipeline, groups: list[dict[str, Any]]) -> None:
    async def check() -> bool | Pending:
        found = await actors.get_or_none(
            pipeline.kube, resources.KUEUE_CLUSTER_QUEUE, actors.QUEUE, namespace=None
        )
        if found is None:
            return Pending("absent")
        held = found["spec"].get("resourceGroups")
        if held != groups or found["spec"].get("cohort") != "kaiwo":
            return Pending(f"resourceGroups {held}, cohort {found['spec'].get('cohort')}")
        return True

    await eventually(check, what=f"ClusterQueue kaiwo with {groups}", within=60)


async def node_is_kaiwos(pipeline: Pipeline, node: actors.GpuNode) -> None:
    pool = SMALL_MI300X_POOL if node.cpu == "64" else MI300X_POOL

    async def check() -> bool | Pending:
        found = await pipeline.kube.get(resources.NODE, node.name)
        labels = found["metadata"]["labels"]
        taints = [
            {k: t[k] for k in ("key", "value", "effect") if k in t}
            for t in found["spec"].get("taints") or []
        ]
        if labels.get("kaiwo/nodepool") != pool or taints != [GPU_TAINT]:
            return Pending(f"labels {labels}, taints {taints}")
        return True

    await eventually(check, what=f"node {node.name} in pool {pool} with the GPU taint")
