"""The whole real Kubernetes stack of a test session (a pytest plugin, see ``tests/conftest.py``).

``real_stack`` is a control plane of its own, separate from ``real_cluster`` (whose tests
assume no Kueue, no scheduler and no kubelet): etcd, kube-apiserver, the
kube-controller-manager, the kube-scheduler with the project's kaiwo-scheduler profile
(``deploy/k8s/scheduler/scheduler.yaml``), kwok as the kubelet of simulated GPU nodes, the
Kueue manager with its webhooks and conversion, and the KubeRay operator, all built by
``make stack`` (:mod:`kaiwo_envtest`). The third-party CRDs come from the stack's modules, ours
from the models. It starts once per session, the first time a test asks for it.

Nodes are the tests' to create (:func:`register_kwok_nodes`, from the sandbox's fleet types):
kwok runs the pods of every node labelled ``sandbox.kaiwo.silogen.ai/simulated=true``, for
:data:`KWOK_TIMING` (a pod runs ``run-seconds`` of its ``sandbox.kaiwo.silogen.ai/`` annotation,
and fails with the message of ``.../fail``, as in the sandbox). A test whose job must run until
something has happened gives it a long run and ends its pods then (:func:`end_running_pods`);
a Ray job, which the stand-in of its head runs 20 s, it ends with :func:`end_ray_job`.

No ``KAIWO_TEST_KUBECONFIG`` here: a given cluster has no kwok nodes to run pods. A missing
binary skips the test with the reason, or fails it under ``KAIWO_REQUIRE_REAL_APISERVER=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_envtest import (
    AssetsNotFoundError,
    ControlPlane,
    ControlPlaneError,
    ControlPlaneOptions,
    StackNotBuiltError,
    built_stack,
    find_binaries,
)
from kaiwo_envtest.kueue import KueueOptions
from kaiwo_envtest.kwok import RUN_SECONDS_ANNOTATION, KwokOptions
from kaiwo_envtest.ray_head import finish_path
from kaiwo_kube import AlreadyExists, KubernetesPort, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import SIMULATED_LABEL, NodeSpec

from tests.real_cluster import (
    ADMISSION_PLUGINS,
    AUDITED_IN_FULL,
    ESTABLISHED_WITHIN,
    FIELD_MANAGER,
    REPO_ROOT,
    RealCluster,
    run_async,
    unavailable,
)
from tests.waiting import Pending, eventually

SCHEDULER_MANIFEST: Final = REPO_ROOT / "deploy" / "k8s" / "scheduler" / "scheduler.yaml"
KWOK_TIMING: Final = KwokOptions(
    node_selector=f"{SIMULATED_LABEL}=true",
    start_seconds=0.5,
    run_seconds=3.0,
    download_seconds=1.0,
)
"""Short: a test's job runs in seconds unless its ``run-seconds`` annotation says more."""
NODE_READY_WITHIN: Final = 120.0
PODS_RUNNING_WITHIN: Final = 90.0
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
K8S_JOB_MODE: Final = "K8sJobMode"
"""KubeRay's default submission mode: a submitter Job of the RayJob's name sends the job."""
NOT_READY_TAINT_KEY: Final = "node.kubernetes.io/not-ready"


def kaiwo_scheduler_configuration(manifest: Path = SCHEDULER_MANIFEST) -> dict[str, Any]:
    """The KubeSchedulerConfiguration of the kaiwo-scheduler's ConfigMap, as deployed."""
    for document in yaml.safe_load_all(manifest.read_text()):
        if document and document.get("kind") == "ConfigMap":
            configuration: dict[str, Any] = yaml.safe_load(document["data"]["config.yaml"])
            return configuration
    raise ValueError(f"{manifest} holds no ConfigMap with the scheduler's configuration")


async def install_our_crds(kubeconfig: Path) -> None:
    """Our CRDs (the third-party ones the plane installed itself), Established and served."""
    async with await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig) as kube:
        await kube.ensure_crds(
            custom_resource_definitions(SERVED_KINDS),
            field_manager=FIELD_MANAGER,
            within=ESTABLISHED_WITHIN,
        )


@pytest.fixture(scope="session")
def real_stack() -> Iterator[RealCluster]:
    """The session's whole real stack (see the module's doc), its CRDs Established."""
    try:
        binaries = find_binaries()
        manifests = built_stack().manifests
        for name in ("kube-scheduler", "kwok", "kueue", "kuberay", "appwrapper"):
            binaries.path(name)
    except (AssetsNotFoundError, StackNotBuiltError) as error:
        unavailable(f"the whole stack is not there: {error}")
        raise  # unavailable() skipped or failed; this line is never reached
    options = ControlPlaneOptions(
        binaries=binaries,
        controller_manager=True,
        audit=True,
        audit_every_request_of=AUDITED_IN_FULL,
        admission_plugins=ADMISSION_PLUGINS,
        scheduler_configuration=kaiwo_scheduler_configuration(),
        kwok=KWOK_TIMING,
        kueue=KueueOptions(),
        kuberay=True,
        appwrapper=True,
        manifests=manifests,
        ready_timeout=180.0,
    )
    started = time.monotonic()
    try:
        plane = ControlPlane(options).__enter__()
    except ControlPlaneError as error:
        pytest.fail(f"the real stack did not start: {error}")
    try:
        run_async(lambda: install_our_crds(plane.kubeconfig))
        print(f"\nreal stack ready in {time.monotonic() - started:.1f} s: {plane.server}")
        yield RealCluster(kubeconfig=plane.kubeconfig, plane=plane)
    finally:
        plane.stop()


# ---------------------------------------------------------------------- nodes kwok runs


def kwok_node(spec: NodeSpec, *, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """``spec``'s Node as a kubelet registers it: labels and capacity (kwok reports it Ready,
    its allocatable equal to its capacity)."""
    node = spec.manifest()
    node["metadata"]["labels"].update(extra_labels or {})
    node["status"] = {"capacity": spec.capacity(), "allocatable": spec.capacity()}
    return node


async def register_kwok_nodes(
    kube: KubernetesPort, specs: Iterable[NodeSpec], *, labels: dict[str, str] | None = None
) -> None:
    """Create the nodes (one already there is kept) and wait until each is Ready and free of
    the not-ready taint, so the scheduler places pods on it."""
    specs = list(specs)
    for spec in specs:
        with contextlib.suppress(AlreadyExists):
            await kube.create(kwok_node(spec, extra_labels=labels), field_manager="kubelet")
    deadline = time.monotonic() + NODE_READY_WITHIN
    for spec in specs:
        while not _schedulable(await kube.get(resources.NODE, spec.name)):
            assert time.monotonic() < deadline, f"node {spec.name} is not Ready for pods"
            await asyncio.sleep(0.2)


def _schedulable(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") == NOT_READY_TAINT_KEY for t in taints)


@contextlib.asynccontextmanager
async def kwok_fleet(
    kube: KubernetesPort, specs: Iterable[NodeSpec], *, also_removed: Iterable[str] = ()
) -> AsyncIterator[None]:
    """The nodes registered (:func:`register_kwok_nodes`) for the block and removed after it,
    with ``also_removed`` (nodes the block may add). Used outermost, so that the nodes go
    last: a pod on a removed node has no kubelet to stop it."""
    specs = list(specs)
    try:
        await register_kwok_nodes(kube, specs)
        yield
    finally:
        await remove_nodes(kube, [*(spec.name for spec in specs), *also_removed])


async def remove_nodes(kube: KubernetesPort, names: Iterable[str]) -> None:
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NODE, name)


# ---------------------------------------------------------------------- runs a test ends


async def end_running_pods(
    kube: KubernetesPort, namespace: str, job: str, *, count: int = 1
) -> None:
    """Wait until ``count`` pods of the Job ``job`` run, then have kwok end them now: their
    ``run-seconds`` annotation set to 0 (kwok reads a pod again at each change of it, and
    times its end from then). A test whose job must run until something has happened gives
    it a long run and ends it here once that happened: no run length guessed long enough for
    a loaded machine, and no waiting out the rest of it. The Job's later pods keep the
    template's run."""

    async def running() -> list[dict[str, Any]] | Pending:
        listed = await kube.list(
            resources.POD, namespace=namespace, label_selector=f"{JOB_NAME_LABEL}={job}"
        )
        found = [p for p in listed.items if (p.get("status") or {}).get("phase") == "Running"]
        return found if len(found) == count else Pending(f"{len(found)} of {count} running")

    pods: list[dict[str, Any]] = await eventually(
        running, what=f"{count} pods of Job {namespace}/{job} running", within=PODS_RUNNING_WITHIN
    )
    for pod in pods:
        await kube.merge_patch(
            resources.POD,
            pod["metadata"]["name"],
            {"metadata": {"annotations": {RUN_SECONDS_ANNOTATION: "0"}}},
            namespace=namespace,
            field_manager="kaiwo-test",
        )


async def end_ray_job(
    kube: KubernetesPort, real_stack: RealCluster, namespace: str, ray_job: str
) -> None:
    """Wait until KubeRay reports the Ray job of the RayJob ``ray_job`` running and its
    submitter Job (``K8sJobMode``, 3 s under kwok; none in ``HTTPMode``) ended, then have the
    stand-in of its head (:mod:`kaiwo_envtest.ray_head`) end the Ray job now, ``SUCCEEDED``.
    KubeRay completes a RayJob once both ended, so it completes with its Ray job, as when the
    job ran its 20 s. A test that only needs a Ray job to finish, or that acted on it while it
    ran, ends it here instead of sitting out the 20 s the stand-in gives every job."""

    async def running() -> dict[str, Any] | Pending:
        found = await kube.get(resources.RAY_JOB, ray_job, namespace=namespace)
        status = found.get("status") or {}
        # SUCCEEDED: a test slower than the job's 20 s finds it ended by itself, as good.
        if status.get("jobStatus") not in ("RUNNING", "SUCCEEDED"):
            return Pending(f"jobStatus {status.get('jobStatus')!r}")
        if (found["spec"].get("submissionMode") or K8S_JOB_MODE) != K8S_JOB_MODE:
            return dict(status)
        try:
            submitter = await kube.get(resources.JOB, ray_job, namespace=namespace)
        except NotFound:
            return Pending("no submitter Job yet")
        conditions = (submitter.get("status") or {}).get("conditions") or ()
        if not any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions
        ):
            return Pending("the submitter Job runs")
        return dict(status)

    status: dict[str, Any] = await eventually(
        running, what=f"the Ray job of {namespace}/{ray_job} running", within=PODS_RUNNING_WITHIN
    )
    url = f"http://{status['dashboardURL']}{finish_path(status['jobId'])}"
    ended = await ask_the_ray_stand_in(real_stack, "POST", url)
    assert ended["status"] == "SUCCEEDED", ended


async def ask_the_ray_stand_in(real_stack: RealCluster, method: str, url: str) -> Any:
    """``method`` ``url`` (a Ray cluster's address, e.g. its dashboard's ``.../api/jobs/<id>``)
    as KubeRay asks it: through the stand-in of the heads the real stack starts, its HTTP
    proxy (:mod:`kaiwo_envtest.ray_head`); the JSON answer."""
    assert real_stack.plane is not None, "only the real stack runs the stand-in of Ray heads"
    return await asyncio.to_thread(_through_proxy, real_stack.plane.endpoints.ray_head, method, url)


def _through_proxy(proxy_port: int, method: str, url: str) -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
    try:
        connection.request(method, url, body=b"", headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        body = answer.read()
        assert answer.status == 200, (method, url, answer.status, body)
        return json.loads(body)
    finally:
        connection.close()
