"""The executor's ServiceAccount on a real API server, as an attacker holding its token would
use it: every attack of issue 23 on the executor's account, each refused by the API server
itself (deploy/k8s/base/admission-policy.yaml, decision 0036), and what the operator does
itself still allowed.

The account authenticates with a TokenRequest token, bound to the roles of
deploy/k8s/base/rbac.yaml, exactly as in tests/integration/rbac/test_least_privilege.py (which
runs the whole operator under the same policies). Without the policies every attack here
succeeds: the roles allow each request.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import AlreadyExists, KubeError, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import ResourceType

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, eventually
from tests.integration.rbac.service_accounts import (
    rbac_installed,
    refusal_in_force,
    service_kubeconfig,
)
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

MANAGER: Final = "kaiwo"
KAIWO_API: Final = "kaiwo.silogen.ai/v1alpha1"
TAINT_KEY_POLICY: Final = "kaiwo-executor-nodes-taint-key"
WORKLOADS_LABEL: Final = "kaiwo.silogen.ai/workloads"
ANNOTATION: Final = "kaiwo.silogen.ai/service-accounts"
NODE: Final = "policy-node"
GPU_TAINT: Final = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
SERVICE_ACCOUNT: Final = ResourceType(
    group="", version="v1", plural="serviceaccounts", kind="ServiceAccount", namespaced=True
)
ESCALATING_ACCOUNT: Final = "clusterrole-aggregation-controller"
"""A kube-system account that may escalate ClusterRoles: a pod running as it is cluster-admin."""


@dataclass(frozen=True, slots=True)
class Cluster:
    admin: KubernetesAsyncioAdapter
    executor: KubernetesAsyncioAdapter
    """Authenticated as system:serviceaccount:kaiwo-system:kaiwo-executor."""
    workloads: str
    """A namespace labelled kaiwo.silogen.ai/workloads=true, holding the KaiwoJob ``owner``."""
    elsewhere: str
    """A namespace of someone else (not labelled)."""
    owner: dict[str, Any]


def owned(name: str, cluster: Cluster, **metadata: Any) -> dict[str, Any]:
    """``metadata`` of a child of ``cluster.owner``, as the planner writes it."""
    owner = cluster.owner["metadata"]
    labels = {
        "app.kubernetes.io/managed-by": "kaiwo",
        "kaiwo.silogen.ai/owner-uid": owner["uid"],
        **metadata.pop("labels", {}),
    }
    return {
        "name": name,
        "namespace": metadata.pop("namespace", owner["namespace"]),
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": KAIWO_API,
                "kind": "KaiwoJob",
                "name": owner["name"],
                "uid": owner["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        **metadata,
    }


def pod_spec(**extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "busybox:1.36"}], **extra}


def pod(metadata: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec(**spec)}


def job(metadata: dict[str, Any], **spec: Any) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", **pod_spec(**spec)}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"template": template},
    }


async def refused(attempt: Awaitable[Any], *, policy: str, also: tuple[str, ...] = ()) -> str:
    """The API server's refusal of ``attempt`` by the admission policy ``policy``, or by one
    of the others that refuse it ``also`` (the API server names one, and which is not fixed)."""
    try:
        await attempt
    except KubeError as error:
        assert error.code == 403, f"refused, but not by a policy: {error.code} {error.message}"
        named = [p for p in (policy, *also) if f"ValidatingAdmissionPolicy '{p}'" in error.message]
        assert named, error.message
        return error.message
    raise AssertionError(f"the API server allowed it (no {policy} refusal)")


async def apply_as_executor(cluster: Cluster, obj: dict[str, Any]) -> dict[str, Any]:
    return await cluster.executor.apply(obj, field_manager=MANAGER, force=True)


# ---------------------------------------------------------------------- the cluster


async def namespace(
    admin: KubernetesAsyncioAdapter,
    name: str,
    *,
    annotations: dict[str, str] | None = None,
    **labels: str,
) -> None:
    metadata: dict[str, Any] = {
        "name": name,
        "labels": {actors.TEST_NAMESPACE_LABEL: "true", **labels},
    }
    if annotations:
        metadata["annotations"] = annotations
    await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})

    async def default_account() -> bool | Pending:
        found = await actors.get_or_none(admin, SERVICE_ACCOUNT, "default", namespace=name)
        return True if found else Pending("the ServiceAccount controller has not made it yet")

    await eventually(default_account, what=f"ServiceAccount {name}/default")


async def in_force(cluster: Cluster) -> None:
    """Until the API server enforces the policies (its informer picks up new bindings). Each
    policy is picked up on its own, and on a busy machine the nodes' one, or the owners' one,
    has come seconds after the others (CI): each is waited for with a change it refuses."""
    probe = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "policy-probe", "namespace": "kube-system"},
    }
    await refusal_in_force(
        lambda: cluster.executor.create(probe, field_manager=MANAGER),
        lambda: cluster.admin.delete(resources.CONFIG_MAP, "policy-probe", namespace="kube-system"),
        refused_by="ValidatingAdmissionPolicy",
        what="the executor's admission policies in force",
    )
    probe_change = {"metadata": {"annotations": {"kaiwo-tests/policy-probe": "x"}}}
    undo = {"metadata": {"annotations": {"kaiwo-tests/policy-probe": None}}}
    await refusal_in_force(
        lambda: cluster.executor.merge_patch(
            resources.NODE, NODE, probe_change, field_manager=MANAGER
        ),
        lambda: cluster.admin.merge_patch(resources.NODE, NODE, undo, field_manager=MANAGER),
        refused_by="kaiwo-executor-nodes",
        what="the nodes' admission policy in force",
    )
    other = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "policy-probe"},
        "spec": {},
    }
    await refusal_in_force(
        lambda: cluster.executor.create(other, field_manager=MANAGER),
        lambda: cluster.admin.delete(resources.KAIWO_CONFIG, "policy-probe"),
        refused_by="'kaiwo-executor-owners'",
        what="the admission policy kaiwo-executor-owners in force",
    )
    await taint_key_in_force(
        cluster, what="the nodes' taint-key policy in force, with its KaiwoConfig"
    )


async def taint_key_in_force(cluster: Cluster, *, what: str) -> None:
    """Until the taint-key policy refuses the executor a record naming another key than the
    KaiwoConfig's (it is lifted while the API server sees no KaiwoConfig, decision 0268)."""
    record = {"metadata": {"annotations": {"kaiwo/gpu-taint": "dedicated"}}}
    undo = {"metadata": {"annotations": {"kaiwo/gpu-taint": None}}}
    await refusal_in_force(
        lambda: cluster.executor.merge_patch(resources.NODE, NODE, record, field_manager=MANAGER),
        lambda: cluster.admin.merge_patch(resources.NODE, NODE, undo, field_manager=MANAGER),
        refused_by=TAINT_KEY_POLICY,
        what=what,
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    suffix = uuid.uuid4().hex[:6]
    async with contextlib.AsyncExitStack() as exits:
        admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
        exits.push_async_callback(admin.close)
        # The nodes' policy reads the GPU taint key from it, and refuses every Node change
        # without it (decision 0211); the operator, which creates it, does not run here.
        await exits.enter_async_context(kaiwo_config_present(admin))
        await exits.enter_async_context(rbac_installed(admin))
        workloads, elsewhere = f"policy-{suffix}", f"payments-{suffix}"
        exits.push_async_callback(remove_everything, admin, (workloads, elsewhere))
        await namespace(admin, workloads, **{WORKLOADS_LABEL: "true"})
        await namespace(admin, elsewhere)
        await admin.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": NODE,
                    "labels": {actors.TEST_NODE_LABEL: "true", "kaiwo/nodepool": "old"},
                },
                "spec": {
                    "taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
                },
            }
        )
        owner = await admin.create(
            {
                "apiVersion": KAIWO_API,
                "kind": "KaiwoJob",
                "metadata": {"name": "payroll", "namespace": workloads},
                "spec": {"image": "busybox:1.36"},
            }
        )
        kubeconfig = await service_kubeconfig(
            real_cluster.kubeconfig, "executor", tmp_path_factory.mktemp("executor")
        )
        executor = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
        exits.push_async_callback(executor.close)
        found = Cluster(
            admin=admin, executor=executor, workloads=workloads, elsewhere=elsewhere, owner=owner
        )
        await in_force(found)
        yield found


@contextlib.asynccontextmanager
async def kaiwo_config_present(admin: KubernetesAsyncioAdapter) -> AsyncIterator[None]:
    """The KaiwoConfig ``kaiwo`` with the default GPU taint key; removed after when made here."""
    made = await actors.get_or_none(admin, resources.KAIWO_CONFIG, "kaiwo", namespace=None) is None
    if made:
        await admin.create(kaiwo_config(GPU_TAINT["key"]))
    else:
        await with_gpu_taint_key(admin, GPU_TAINT["key"])
    try:
        yield
    finally:
        if made:
            with contextlib.suppress(NotFound):
                await admin.delete(resources.KAIWO_CONFIG, "kaiwo")


def kaiwo_config(gpu_taint_key: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"nodes": {"defaultGpuTaintKey": gpu_taint_key}},
    }


async def with_gpu_taint_key(admin: KubernetesAsyncioAdapter, key: str) -> None:
    await admin.merge_patch(
        resources.KAIWO_CONFIG, "kaiwo", {"spec": {"nodes": {"defaultGpuTaintKey": key}}}
    )


async def remove_everything(admin: KubernetesAsyncioAdapter, namespaces: tuple[str, ...]) -> None:
    """What the tests made, and what an attack made where the policies did not hold."""
    with contextlib.suppress(NotFound):
        await admin.delete(resources.NODE, NODE)
    for name in ("evil", "reads-secrets"):
        with contextlib.suppress(NotFound):
            await admin.delete(resources.POD, name, namespace="kube-system")
    for name in ("steal", "kaiwo"):
        with contextlib.suppress(NotFound):
            await admin.delete(resources.ROLE_BINDING, name, namespace="default")
    with contextlib.suppress(NotFound):
        await admin.delete(resources.KUEUE_LOCAL_QUEUE, "kaiwo", namespace="kube-system")
    for name in namespaces:
        with contextlib.suppress(NotFound):
            await admin.delete(resources.NAMESPACE, name)


# ---------------------------------------------------------------------- issue 23's attacks


async def test_a_privileged_host_pid_pod_in_kube_system_is_refused(cluster: Cluster) -> None:
    """The way to cluster-admin: a pod in kube-system running as an account that may escalate
    ClusterRoles, privileged and in the node's PID namespace."""
    evil = pod(
        owned("evil", cluster, namespace="kube-system"),
        serviceAccountName=ESCALATING_ACCOUNT,
        hostPID=True,
    )
    evil["spec"]["containers"][0]["securityContext"] = {"privileged": True}

    await refused(
        cluster.executor.create(evil, field_manager=MANAGER),
        policy="kaiwo-executor-namespaces",
        also=("kaiwo-executor-pods",),
    )
    # Nothing at all in kube-system, however harmless.
    harmless = pod(owned("evil", cluster, namespace="kube-system"))
    message = await refused(
        cluster.executor.create(harmless, field_manager=MANAGER),
        policy="kaiwo-executor-namespaces",
    )

    assert "writes nothing in namespace kube-system" in message
    assert (
        await actors.get_or_none(cluster.admin, resources.POD, "evil", namespace="kube-system")
        is None
    )


async def test_a_pod_mounting_another_namespaces_secret_is_refused(cluster: Cluster) -> None:
    """A pod mounts the Secrets of its own namespace: the executor writes pods only in
    namespaces that hold workloads, so no other team's Secret can be mounted."""
    await cluster.admin.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "payroll-db", "namespace": cluster.elsewhere},
            "stringData": {"password": "hunter2"},
        }
    )
    reader = pod(
        owned("reads-secrets", cluster, namespace=cluster.elsewhere),
        volumes=[{"name": "stolen", "secret": {"secretName": "payroll-db"}}],
    )

    message = await refused(
        cluster.executor.create(reader, field_manager=MANAGER), policy="kaiwo-executor-namespaces"
    )

    assert (
        f"only in namespaces labelled {WORKLOADS_LABEL}=true, and {cluster.elsewhere} is not"
        in message
    )


async def test_a_role_binding_handing_out_the_executors_cluster_role_is_refused(
    cluster: Cluster,
) -> None:
    """RBAC lets a subject bind a role it holds itself: the executor could give its own
    ClusterRole to anyone."""
    for where in ("default", cluster.workloads):
        steal = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": owned("steal", cluster, namespace=where),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "kaiwo-executor",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "mallory"}
            ],
        }
        # In default (no workloads there) the namespaces policy refuses it as well.
        also = ("kaiwo-executor-namespaces",) if where == "default" else ()
        await refused(
            cluster.executor.create(steal, field_manager=MANAGER),
            policy="kaiwo-executor-rbac",
            also=also,
        )


async def test_a_role_granting_more_than_get_and_patch_of_named_pods_is_refused(
    cluster: Cluster,
) -> None:
    """A Role handing the executor's own rights (any Pod created or deleted) to whoever a
    binding names."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": owned("model-payroll-adapter-loader", cluster),
        # Rights the executor holds, so RBAC's own escalation check lets it hand them out.
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}],
    }

    message = await refused(apply_as_executor(cluster, role), policy="kaiwo-executor-rbac")

    assert "grant only get and patch of named Pods" in message


CONTROL_PLANE_LABEL: Final = {"node-role.kubernetes.io/control-plane": ""}
INFRA_TAINT: Final = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
NODE_CHANGES: Final = {
    "cordon it": {"spec": {"unschedulable": True}},
    "label it a control-plane node": {"metadata": {"labels": CONTROL_PLANE_LABEL}},
    "drop the infra taint": {"spec": {"taints": []}},
    "taint it for someone else": {
        "spec": {"taints": [INFRA_TAINT, {"key": "evict", "effect": "NoExecute"}]}
    },
    "annotate it": {
        "metadata": {
            "annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}
        }
    },
    "set its provider id": {"spec": {"providerID": "aws:///evil"}},
    # The record of the operator's taint names the key in force only: a record of another key
    # would let a later write remove that key's taint (decision 0145).
    "record another key as its taint": {
        "metadata": {"annotations": {"kaiwo/gpu-taint": "dedicated"}}
    },
}


@pytest.mark.parametrize(("change", "patch"), NODE_CHANGES.items(), ids=list(NODE_CHANGES))
async def test_node_changes_beyond_kaiwos_labels_and_taint_are_refused(
    cluster: Cluster, change: str, patch: dict[str, Any]
) -> None:
    before = await cluster.admin.get(resources.NODE, NODE)

    await refused(
        cluster.executor.merge_patch(resources.NODE, NODE, patch, field_manager=MANAGER),
        policy="kaiwo-executor-nodes",
        also=(TAINT_KEY_POLICY,),
    )

    after = await cluster.admin.get(resources.NODE, NODE)
    # Not the resourceVersion: the controller manager's node lifecycle controller writes to a
    # node without a kubelet (its not-ready taints) whenever it likes.
    assert node_as_the_patch_sees_it(after) == node_as_the_patch_sees_it(before), change


def node_as_the_patch_sees_it(node: dict[str, Any]) -> dict[str, Any]:
    """What the refused patches would have changed: the spec, the labels and the annotations,
    apart from the controller manager's own taints and annotations (``node.*``)."""
    spec = dict(node.get("spec", {}))
    spec["taints"] = [
        taint for taint in spec.get("taints", []) if not taint["key"].startswith("node.")
    ]
    metadata = node["metadata"]
    annotations = metadata.get("annotations", {})
    return {
        "spec": spec,
        "labels": metadata.get("labels", {}),
        "annotations": {
            key: value for key, value in annotations.items() if not key.startswith("node.")
        },
    }


def deployment(metadata: dict[str, Any]) -> dict[str, Any]:
    name = metadata["name"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec()},
        },
    }


def config_map(metadata: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def service(metadata: dict[str, Any]) -> dict[str, Any]:
    selector = {"app": metadata["name"]}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"ports": [{"port": 80}], "selector": selector},
    }


def volume_claim(metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


FOREIGN_KINDS: Final = {
    resources.POD: pod,
    resources.JOB: job,
    resources.DEPLOYMENT: deployment,
    resources.CONFIG_MAP: config_map,
    resources.SERVICE: service,
    resources.PERSISTENT_VOLUME_CLAIM: volume_claim,
}


@pytest.mark.parametrize(
    ("resource", "manifest"), FOREIGN_KINDS.items(), ids=[r.kind for r in FOREIGN_KINDS]
)
async def test_deleting_someone_elses_objects_is_refused(
    cluster: Cluster,
    resource: ResourceType,
    manifest: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """Foreign objects, in another team's namespace and in a namespace with workloads."""
    name = f"foreign-{resource.plural}"
    for where in (cluster.elsewhere, cluster.workloads):
        await cluster.admin.create(manifest({"name": name, "namespace": where}))

        # Elsewhere the namespaces policy refuses it as well. A Pod, Job or Deployment no
        # Kaiwo kind owns, controlled by nothing, is judged as a GPU preemption (none opted in).
        also = ("kaiwo-executor-namespaces",) if where == cluster.elsewhere else ()
        policy = (
            GPU_PREEMPTION
            if resource in (resources.POD, resources.JOB, resources.DEPLOYMENT)
            else "kaiwo-executor-ownership"
        )
        await refused(
            cluster.executor.delete(resource, name, namespace=where, propagation="Background"),
            policy=policy,
            also=also,
        )

        assert await actors.get_or_none(cluster.admin, resource, name, namespace=where) is not None


# ---------------------------------------------------------------------- GPU idle preemption

GPU_PREEMPTION: Final = "kaiwo-executor-gpu-preemption"
OPTED_IN: Final = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}


def stateful_set(metadata: dict[str, Any]) -> dict[str, Any]:
    found = deployment(metadata)
    found["kind"] = "StatefulSet"
    found["spec"]["serviceName"] = metadata["name"]
    return found


def ray_cluster(metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": metadata,
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec()}}},
    }


def replicas_to_zero(live: dict[str, Any], *extra: dict[str, Any]) -> list[dict[str, Any]]:
    """The executor's preemption patch (kaiwo_executor.apply_plan), and ``extra`` operations."""
    return [
        {"op": "test", "path": "/metadata/uid", "value": live["metadata"]["uid"]},
        {"op": "test", "path": "/spec/replicas", "value": live["spec"]["replicas"]},
        {"op": "replace", "path": "/spec/replicas", "value": 0},
        *extra,
    ]


async def as_executor_patch(
    cluster: Cluster, resource: ResourceType, live: dict[str, Any], *extra: dict[str, Any]
) -> dict[str, Any]:
    meta = live["metadata"]
    return await cluster.executor.json_patch(
        resource,
        meta["name"],
        replicas_to_zero(live, *extra),
        namespace=meta["namespace"],
        field_manager=MANAGER,
    )


async def test_an_opted_in_workload_no_kaiwo_kind_owns_is_preempted(cluster: Cluster) -> None:
    """By its own annotations, in a namespace of someone else without the workloads label:
    a bare Pod, a Job, a RayCluster deleted; a Deployment scaled to zero."""
    where = cluster.elsewhere
    for resource, manifest in (
        (resources.POD, pod),
        (resources.JOB, job),
        (resources.RAY_CLUSTER, ray_cluster),
    ):
        name = f"idle-{resource.plural}"
        meta = {"name": name, "namespace": where, "annotations": OPTED_IN}
        await cluster.admin.create(manifest(meta))
        await cluster.executor.delete(resource, name, namespace=where, propagation="Background")
    deployed = await cluster.admin.create(
        deployment({"name": "idle-serve", "namespace": where, "annotations": OPTED_IN})
    )

    scaled = await as_executor_patch(cluster, resources.DEPLOYMENT, deployed)

    assert scaled["spec"]["replicas"] == 0
    assert scaled["spec"]["template"] == deployed["spec"]["template"]


async def test_a_namespace_that_opted_in_opts_its_workloads_in_unless_they_opt_out(
    cluster: Cluster,
) -> None:
    """The namespace's annotations count for a StatefulSet without any; a Job's own
    ``enabled: "false"`` wins over its namespace's.

    In a namespace of its own, opted in from its creation: the API server's admission reads
    namespaces from a cache that follows a change a moment later, so an opt-in patched onto
    the shared namespace could be missed here, and its removal missed by the next test."""
    where = f"{cluster.elsewhere}-opted-in"
    await namespace(cluster.admin, where, annotations=OPTED_IN)
    try:
        stateful = await cluster.admin.create(stateful_set({"name": "db", "namespace": where}))

        async def scaled_down() -> dict[str, Any] | Pending:
            try:
                return await as_executor_patch(cluster, resources.STATEFUL_SET, stateful)
            except KubeError as error:
                if error.code != 403:
                    raise
                return Pending(error.message)  # admission may not see the namespace yet

        scaled = await eventually(scaled_down, what="the StatefulSet scaled down as opted in")
        assert scaled["spec"]["replicas"] == 0

        opted_out = {"kaiwo.silogen.ai/gpu-preemption.enabled": "false"}
        await cluster.admin.create(
            job({"name": "keep-me", "namespace": where, "annotations": opted_out})
        )
        message = await refused(
            cluster.executor.delete(resources.JOB, "keep-me", namespace=where),
            policy=GPU_PREEMPTION,
        )
        assert "opted in to GPU idle preemption" in message
    finally:
        with contextlib.suppress(NotFound):
            await cluster.admin.delete(resources.NAMESPACE, where)


async def test_preemption_changes_nothing_but_the_replicas_and_only_to_zero(
    cluster: Cluster,
) -> None:
    where = cluster.elsewhere
    meta = {"name": "busy-serve", "namespace": where, "annotations": OPTED_IN}
    live = await cluster.admin.create(deployment(meta))
    image = {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "evil"}
    label = {
        "op": "add",
        "path": "/metadata/labels",
        "value": {"app.kubernetes.io/managed-by": "kaiwo"},
    }

    for extra in (image, label):
        message = await refused(
            as_executor_patch(cluster, resources.DEPLOYMENT, live, extra), policy=GPU_PREEMPTION
        )
        assert "without any other change" in message
    await refused(
        cluster.executor.json_patch(
            resources.DEPLOYMENT,
            "busy-serve",
            [{"op": "replace", "path": "/spec/replicas", "value": 5}],
            namespace=where,
            field_manager=MANAGER,
        ),
        policy=GPU_PREEMPTION,
    )
    # A Deployment is scaled, never deleted (RBAC grants no StatefulSet create at all).
    await refused(
        cluster.executor.delete(resources.DEPLOYMENT, "busy-serve", namespace=where),
        policy=GPU_PREEMPTION,
    )
    unchanged = await cluster.admin.get(resources.DEPLOYMENT, "busy-serve", namespace=where)
    # (Its controller writes its status meanwhile: its spec and metadata are the test's.)
    assert unchanged["spec"] == live["spec"]
    assert unchanged["metadata"].get("labels") is None
    assert unchanged["metadata"]["generation"] == live["metadata"]["generation"]


async def test_a_pod_some_controller_runs_is_never_preempted_by_itself(cluster: Cluster) -> None:
    """Preemption stops a workload's root; a Pod its RayCluster controls is left to the
    RayCluster (and is not the operator's either), opted in or not."""
    where = cluster.elsewhere
    owner = await cluster.admin.create(
        ray_cluster({"name": "owner-cluster", "namespace": where, "annotations": OPTED_IN})
    )
    reference = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": "owner-cluster",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    meta = {
        "name": "ray-head",
        "namespace": where,
        "annotations": OPTED_IN,
        "ownerReferences": [reference],
    }
    await cluster.admin.create(pod(meta))

    await refused(
        cluster.executor.delete(resources.POD, "ray-head", namespace=where),
        policy="kaiwo-executor-ownership",
        also=("kaiwo-executor-namespaces",),
    )


def cron_job(metadata: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    template = job({"annotations": annotations})
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata,
        "spec": {
            "schedule": "@yearly",
            "suspend": True,  # the test makes its run itself
            "jobTemplate": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


async def test_a_cronjobs_opted_in_run_is_preempted_and_another_kinds_job_is_not(
    cluster: Cluster,
) -> None:
    """Decision 0056: a Job a CronJob controls is a root of its own: deleted when it opted in
    (its annotations come from the CronJob's job template); the CronJob is never touched; a
    Job another kind controls stays the ownership policy's (not the operator's)."""
    where = cluster.elsewhere
    cron = await cluster.admin.create(cron_job({"name": "nightly", "namespace": where}, OPTED_IN))
    reference = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "name": "nightly",
        "uid": cron["metadata"]["uid"],
        "controller": True,
    }
    run = {"name": "nightly-1", "namespace": where, "annotations": OPTED_IN}
    await cluster.admin.create(job({**run, "ownerReferences": [reference]}))
    not_opted = {"name": "nightly-2", "namespace": where, "ownerReferences": [reference]}
    await cluster.admin.create(job(not_opted))

    await cluster.executor.delete(
        resources.JOB, "nightly-1", namespace=where, propagation="Background"
    )
    message = await refused(
        cluster.executor.delete(resources.JOB, "nightly-2", namespace=where),
        policy=GPU_PREEMPTION,
    )
    assert "opted in to GPU idle preemption" in message

    owner = await cluster.admin.create(
        ray_cluster({"name": "job-owner", "namespace": where, "annotations": OPTED_IN})
    )
    ray_reference = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": "job-owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    theirs = {"name": "theirs", "namespace": where, "annotations": OPTED_IN}
    await cluster.admin.create(job({**theirs, "ownerReferences": [ray_reference]}))
    await refused(
        cluster.executor.delete(resources.JOB, "theirs", namespace=where),
        policy="kaiwo-executor-ownership",
        also=("kaiwo-executor-namespaces",),
    )


async def test_taking_over_someone_elses_object_is_refused(cluster: Cluster) -> None:
    """A KaiwoJob ``payroll`` wanting a ConfigMap ``payroll-download`` that someone else's
    ConfigMap of that name already is: applying over it would adopt it (its owner reference
    added), and deleting the KaiwoJob would let the garbage collector delete it."""
    foreign = await cluster.admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "payroll-download", "namespace": cluster.workloads},
            "data": {"salaries.csv": "alice,100"},
        }
    )
    ours = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned("payroll-download", cluster),
        "data": {"download.yaml": "s3: {}"},
    }

    message = await refused(apply_as_executor(cluster, ours), policy="kaiwo-executor-ownership")

    assert "the operator never adopts an object" in message
    live = await cluster.admin.get(
        resources.CONFIG_MAP, "payroll-download", namespace=cluster.workloads
    )
    assert live["metadata"]["resourceVersion"] == foreign["metadata"]["resourceVersion"]
    assert "ownerReferences" not in live["metadata"]


async def test_a_local_queue_in_kube_system_is_refused(cluster: Cluster) -> None:
    """The forged KaiwoQueueConfig's LocalQueues in kube-system."""
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {
            "name": "kaiwo",
            "namespace": "kube-system",
            "labels": {
                "app.kubernetes.io/managed-by": "kaiwo",
                "kaiwo.silogen.ai/queue-config": "kaiwo",
            },
        },
        "spec": {"clusterQueue": "kaiwo"},
    }

    await refused(
        apply_as_executor(cluster, queue),
        policy="kaiwo-executor-namespaces",
        also=("kaiwo-executor-ownership",),  # it names no owner either
    )


# ---------------------------------------------------------------------- what a workload may be


@pytest.mark.parametrize(
    ("breakout", "spec"),
    [
        ("privileged", {}),
        ("hostPID", {"hostPID": True}),
        ("hostIPC", {"hostIPC": True}),
        ("hostNetwork", {"hostNetwork": True}),
        ("hostPath", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
    ],
)
@pytest.mark.parametrize("make", [pod, job], ids=["Pod", "Job"])
async def test_a_workload_that_breaks_out_of_its_pod_is_refused(
    cluster: Cluster, breakout: str, spec: dict[str, Any], make: Callable[..., dict[str, Any]]
) -> None:
    """Even in a namespace with workloads, carrying the operator's labels and owner."""
    obj = make(owned(f"breakout-{breakout.lower()}", cluster), **spec)
    if breakout == "privileged":
        template = obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]
        template["containers"][0]["securityContext"] = {"privileged": True}

    await refused(apply_as_executor(cluster, obj), policy="kaiwo-executor-pods")


async def test_a_pod_runs_only_as_a_service_account_its_namespace_names(cluster: Cluster) -> None:
    """CEL cannot read the owner, so it cannot know which account the owner named; the
    namespace's administrator names the accounts workloads may use, in an annotation the
    executor cannot write."""
    await cluster.admin.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "trainer", "namespace": cluster.workloads},
        }
    )
    trainer = job(owned("as-trainer", cluster), serviceAccountName="trainer")

    message = await refused(apply_as_executor(cluster, trainer), policy="kaiwo-executor-pods")
    assert f"only as default (the namespace lists more in its annotation {ANNOTATION})" in message

    await cluster.admin.merge_patch(
        resources.NAMESPACE,
        cluster.workloads,
        {"metadata": {"annotations": {ANNOTATION: "loader, trainer"}}},
    )

    async def allowed() -> dict[str, Any] | Pending:
        try:
            return await apply_as_executor(cluster, trainer)
        except KubeError as error:  # the policy may still see the namespace as it was
            return Pending(error.message)

    await eventually(allowed, what="a Job as trainer once the namespace names it")


async def test_an_app_wrapper_wraps_nothing_but_ray_services(cluster: Cluster) -> None:
    """The AppWrapper controller creates what it wraps with its own account: wrapping a
    ClusterRoleBinding would make someone cluster-admin."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "wrapped-admin"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "mallory"}],
    }
    wrapper = {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": owned("wrapped", cluster),
        "spec": {"components": [{"template": binding}]},
    }

    message = await refused(apply_as_executor(cluster, wrapper), policy="kaiwo-executor-pods")

    assert "wraps RayServices only" in message


async def test_only_the_singletons_named_kaiwo_are_created(cluster: Cluster) -> None:
    other = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "other"},
        "spec": {},
    }

    # A create cannot be narrowed by name in RBAC (the name is not known when it authorizes).
    await refused(
        cluster.executor.create(other, field_manager=MANAGER), policy="kaiwo-executor-owners"
    )


# ---------------------------------------------------------------------- what the operator does


async def test_the_operators_own_writes_pass(cluster: Cluster) -> None:
    """A child of the KaiwoJob created, changed and deleted; Kaiwo's node labels and taint."""
    entrypoint = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned("payroll-entrypoint", cluster),
        "data": {"entrypoint.sh": "python train.py"},
    }
    await apply_as_executor(cluster, entrypoint)
    entrypoint["data"] = {"entrypoint.sh": "python train.py --epochs 2"}
    await apply_as_executor(cluster, entrypoint)
    await cluster.executor.delete(
        resources.CONFIG_MAP,
        "payroll-entrypoint",
        namespace=cluster.workloads,
        propagation="Background",
    )
    await apply_as_executor(cluster, job(owned("payroll", cluster)))

    node = await cluster.executor.get(resources.NODE, NODE)
    labels = {"kaiwo/nodepool": "amd-mi300x-8gpu", "kaiwo/gpu-vendor": "amd"}
    taints = [*node["spec"]["taints"], GPU_TAINT]
    # The taint goes with its record, in the same patch, as the executor writes it
    # (kaiwo_executor.node_merge, decision 0145).
    record = {"kaiwo/gpu-taint": GPU_TAINT["key"]}
    await cluster.executor.merge_patch(
        resources.NODE,
        NODE,
        {"metadata": {"labels": labels, "annotations": record}, "spec": {"taints": taints}},
        field_manager=MANAGER,
    )

    patched = await cluster.admin.get(resources.NODE, NODE)
    assert patched["spec"]["taints"] == taints
    assert {
        k: v for k, v in patched["metadata"]["labels"].items() if k.startswith("kaiwo/")
    } == labels


OLD_GPU_TAINT: Final = {"key": "example.com/old-gpu", "value": "true", "effect": "NoSchedule"}


async def test_the_operators_taint_moves_from_the_key_its_record_names_only(
    cluster: Cluster,
) -> None:
    """``defaultGpuTaintKey`` renamed from example.com/old-gpu (decision 0145): the executor
    removes the taint the node's record names and adds the one in force; any other taint
    stays, and a taint of the old key is added by no one."""
    node = await cluster.admin.get(resources.NODE, NODE)
    others = [t for t in node["spec"]["taints"] if t["key"] != GPU_TAINT["key"]]
    await cluster.admin.merge_patch(
        resources.NODE,
        NODE,
        {
            "metadata": {"annotations": {"kaiwo/gpu-taint": OLD_GPU_TAINT["key"]}},
            "spec": {"taints": [*others, OLD_GPU_TAINT]},
        },
        field_manager=MANAGER,
    )
    node = await cluster.admin.get(resources.NODE, NODE)
    recorded = node["spec"]["taints"]
    unrecorded = [t for t in recorded if t["key"] != "dedicated"]
    await refused(
        cluster.executor.merge_patch(
            resources.NODE, NODE, {"spec": {"taints": unrecorded}}, field_manager=MANAGER
        ),
        policy="kaiwo-executor-nodes",
    )

    moved = [*(t for t in recorded if t != OLD_GPU_TAINT), GPU_TAINT]
    await cluster.executor.merge_patch(
        resources.NODE,
        NODE,
        {
            "metadata": {"annotations": {"kaiwo/gpu-taint": GPU_TAINT["key"]}},
            "spec": {"taints": moved},
        },
        field_manager=MANAGER,
    )
    patched = await cluster.admin.get(resources.NODE, NODE)
    assert patched["spec"]["taints"] == moved
    assert patched["metadata"]["annotations"]["kaiwo/gpu-taint"] == GPU_TAINT["key"]
    await refused(
        cluster.executor.merge_patch(
            resources.NODE,
            NODE,
            {"spec": {"taints": [*moved, OLD_GPU_TAINT]}},
            field_manager=MANAGER,
        ),
        policy="kaiwo-executor-nodes",
    )

    # Back as the other tests found it.
    await cluster.admin.merge_patch(
        resources.NODE,
        NODE,
        {
            "metadata": {"annotations": {"kaiwo/gpu-taint": None}},
            "spec": {"taints": [t for t in moved if t != GPU_TAINT]},
        },
        field_manager=MANAGER,
    )


RENAMED_GPU_TAINT: Final = {"key": "example.com/gpu-node", "value": "true", "effect": "NoSchedule"}


async def test_the_gpu_taint_key_allowed_is_the_one_the_kaiwo_config_names(
    cluster: Cluster,
) -> None:
    """An administrator renames ``defaultGpuTaintKey`` with kubectl edit: the API server reads
    the KaiwoConfig itself (decision 0211), so the executor may then move its taint to the new
    key, and the old key is no longer its to add. Before, the key was written into the policy
    at install, and every patch of the rename was refused."""
    node = await cluster.admin.get(resources.NODE, NODE)
    others = [t for t in node["spec"].get("taints", []) if not t["key"].startswith("node.")]
    await cluster.admin.merge_patch(
        resources.NODE,
        NODE,
        {
            "metadata": {"annotations": {"kaiwo/gpu-taint": GPU_TAINT["key"]}},
            "spec": {"taints": [*others, GPU_TAINT]},
        },
        field_manager=MANAGER,
    )
    moved = {
        "metadata": {"annotations": {"kaiwo/gpu-taint": RENAMED_GPU_TAINT["key"]}},
        "spec": {"taints": [*others, RENAMED_GPU_TAINT]},
    }
    await refused(
        cluster.executor.merge_patch(resources.NODE, NODE, moved, field_manager=MANAGER),
        policy=TAINT_KEY_POLICY,
    )

    await with_gpu_taint_key(cluster.admin, RENAMED_GPU_TAINT["key"])
    try:

        async def taken() -> bool | Pending:
            try:
                await cluster.executor.merge_patch(
                    resources.NODE, NODE, moved, field_manager=MANAGER
                )
            except KubeError as error:  # the API server's copy of the KaiwoConfig lags
                return Pending(error.message)
            return True

        await eventually(taken, what="the taint moved to the renamed key", interval=0.5)
        patched = await cluster.admin.get(resources.NODE, NODE)
        assert RENAMED_GPU_TAINT in patched["spec"]["taints"]
        assert GPU_TAINT not in patched["spec"]["taints"]
        await refused(
            cluster.executor.merge_patch(
                resources.NODE,
                NODE,
                {"spec": {"taints": [*others, RENAMED_GPU_TAINT, GPU_TAINT]}},
                field_manager=MANAGER,
            ),
            policy="kaiwo-executor-nodes",
        )
    finally:
        await with_gpu_taint_key(cluster.admin, GPU_TAINT["key"])
        await cluster.admin.merge_patch(
            resources.NODE,
            NODE,
            {
                "metadata": {"annotations": {"kaiwo/gpu-taint": None}},
                "spec": {"taints": others},
            },
            field_manager=MANAGER,
        )


async def test_without_the_kaiwo_config_only_the_taint_key_check_is_lifted(
    cluster: Cluster,
) -> None:
    """Decision 0268: the KaiwoConfig ``kaiwo`` deleted (an administrator did, or the operator
    has not made it yet). Before, the API server refused every Node change of every identity,
    "no params found for policy binding with `Deny` parameterNotFoundAction", the node
    controllers' and the administrators' too. Now an administrator's label goes through, the
    executor's change of a label not under kaiwo/ is still refused, and its kaiwo/ label
    passes."""
    kept = await cluster.admin.get(resources.KAIWO_CONFIG, "kaiwo")
    await cluster.admin.delete(resources.KAIWO_CONFIG, "kaiwo")
    try:

        async def admins_label_passes() -> bool | Pending:
            try:
                await cluster.admin.merge_patch(
                    resources.NODE, NODE, {"metadata": {"labels": {"team": "infra"}}}
                )
            except KubeError as error:  # the API server's copy of the KaiwoConfig lags
                return Pending(error.message)
            return True

        await eventually(admins_label_passes, what="an administrator's Node label", interval=0.5)
        await refused(
            cluster.executor.merge_patch(
                resources.NODE,
                NODE,
                {"metadata": {"labels": {"team": "payments"}}},
                field_manager=MANAGER,
            ),
            policy="kaiwo-executor-nodes",
        )
        pool = {"metadata": {"labels": {"kaiwo/nodepool": "without-config"}}}
        await cluster.executor.merge_patch(resources.NODE, NODE, pool, field_manager=MANAGER)
        labels = (await cluster.admin.get(resources.NODE, NODE))["metadata"]["labels"]
        assert (labels["team"], labels["kaiwo/nodepool"]) == ("infra", "without-config")
    finally:
        spec = kept.get("spec") or {}
        with contextlib.suppress(AlreadyExists):
            await cluster.admin.create({**kaiwo_config(GPU_TAINT["key"]), "spec": spec})
        await cluster.admin.merge_patch(
            resources.NODE,
            NODE,
            {"metadata": {"labels": {"team": None, "kaiwo/nodepool": "old"}}},
            field_manager=MANAGER,
        )
        await taint_key_in_force(cluster, what="the taint-key policy in force again")


async def test_other_identities_are_not_bound_by_the_policies(cluster: Cluster) -> None:
    """The policies match the executor's requests only: an administrator's are left alone."""
    await cluster.admin.merge_patch(resources.NODE, NODE, {"spec": {"unschedulable": True}})
    await cluster.admin.merge_patch(resources.NODE, NODE, {"spec": {"unschedulable": None}})
