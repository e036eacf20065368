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
something has happened gives it a long run and ends its pods then (:func:`end_running_pods`).

No ``KAIWO_TEST_KUBECONFIG`` here: a given cluster has no kwok nodes to run pods. A missing
binary skips the test with the reason, or fails it under ``KAIWO_REQUIRE_REAL_APISERVER=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
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
