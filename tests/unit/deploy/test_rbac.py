"""The operator's RBAC (deploy/k8s/base/rbac.yaml), read statically: no wildcard anywhere, each
ServiceAccount bound to its own roles only, the planner and the recorder without any role or
token, the watcher reading exactly what it watches and writing nothing, and what each service
may write, by hand. Whether the roles fit the calls the code makes is checked on a real API
server by tests/integration/rbac."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Final

import yaml
from kaiwo_watcher.served_kinds import BUILT_IN_GROUPS
from kaiwo_watcher.watch_list import DEFAULT_WATCH_LIST

BASE: Final = Path(__file__).resolve().parents[3] / "deploy" / "k8s" / "base"
NAMESPACE: Final = "kaiwo-system"
ROLE_KINDS: Final = ("ClusterRole", "Role")
BINDING_KINDS: Final = ("ClusterRoleBinding", "RoleBinding")
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete"})
ALLOWED_VERBS: Final = WRITE_VERBS | {"get", "list", "watch"}

CHILD_VERBS: Final = frozenset({"create", "patch", "delete"})
EXECUTOR_WRITES: Final[dict[tuple[str, str], set[str]]] = {
    # The default singletons, created when missing by server-side apply (which the API
    # server authorizes as patch and create).
    ("config.kaiwo.silogen.ai", "kaiwoconfigs"): {"create", "patch"},
    ("kaiwo.silogen.ai", "kaiwoqueueconfigs"): {"create", "patch"},
    # Status of the owners that have plans.
    ("kaiwo.silogen.ai", "kaiwojobs/status"): {"patch"},
    ("kaiwo.silogen.ai", "kaiwoservices/status"): {"patch"},
    ("kaiwo.silogen.ai", "kaiwoqueueconfigs/status"): {"patch"},
    # blockOwnerDeletion on the children's owner references.
    ("kaiwo.silogen.ai", "kaiwojobs/finalizers"): {"update"},
    ("kaiwo.silogen.ai", "kaiwoservices/finalizers"): {"update"},
    ("kaiwo.silogen.ai", "kaiwoqueueconfigs/finalizers"): {"update"},
    # Workload children.
    ("", "persistentvolumeclaims"): set(CHILD_VERBS),
    ("", "configmaps"): set(CHILD_VERBS),
    ("", "services"): set(CHILD_VERBS),
    ("batch", "jobs"): set(CHILD_VERBS),
    ("apps", "deployments"): set(CHILD_VERBS),
    ("ray.io", "rayjobs"): set(CHILD_VERBS),
    ("workload.codeflare.dev", "appwrappers"): set(CHILD_VERBS),
    # The AppWrapper webhook's access check of a Ray service's component (decision 0184).
    ("ray.io", "rayservices"): {"create"},
    ("gateway.networking.k8s.io", "httproutes"): set(CHILD_VERBS),
    # The KaiwoQueueConfig's Kueue objects.
    ("kueue.x-k8s.io", "resourceflavors"): set(CHILD_VERBS),
    ("kueue.x-k8s.io", "clusterqueues"): set(CHILD_VERBS),
    ("kueue.x-k8s.io", "localqueues"): set(CHILD_VERBS),
    ("kueue.x-k8s.io", "workloadpriorityclasses"): set(CHILD_VERBS),
    ("kueue.x-k8s.io", "topologies"): set(CHILD_VERBS),
    # A KubeAI Model: its server Pods, the Role and RoleBinding of its adapter loaders,
    # its cache-eviction finalizer (a patch), its status, its scale, and blockOwnerDeletion.
    ("", "pods"): set(CHILD_VERBS),
    ("rbac.authorization.k8s.io", "roles"): set(CHILD_VERBS),
    ("rbac.authorization.k8s.io", "rolebindings"): set(CHILD_VERBS),
    ("kubeai.org", "models"): {"patch"},
    ("kubeai.org", "models/status"): {"patch"},
    ("kubeai.org", "models/scale"): {"patch"},
    ("kubeai.org", "models/finalizers"): {"update"},
    # GPU idle preemption of workloads no Kaiwo kind owns (decision 0047): the GpuWorkload
    # records (a create-only apply, their status, their deletion after the TTL), a
    # StatefulSet scaled to zero by a patch of its replicas, a RayCluster deleted (Pods,
    # Jobs, RayJobs and Deployments with the grants above).
    ("kaiwo.silogen.ai", "gpuworkloads"): {"create", "patch", "delete"},
    ("kaiwo.silogen.ai", "gpuworkloads/status"): {"patch"},
    ("apps", "statefulsets"): {"patch"},
    ("ray.io", "rayclusters"): {"delete"},
    # Kaiwo's node labels and taint; Events.
    ("", "nodes"): {"patch"},
    ("", "events"): {"create"},
}
"""What the executor may write, by hand: (apiGroup, resource) -> verbs. The real API server
is asked the same in tests/integration/deploy."""

Grant = tuple[str, str, str]
"""(apiGroup, resource[/subresource], verb)."""


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def rbac() -> list[dict[str, Any]]:
    return documents(BASE / "rbac.yaml")


def roles() -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in rbac() if o["kind"] in ROLE_KINDS}


def grants(role: dict[str, Any], *, names: bool = False) -> set[Any]:
    """Every (group, resource, verb) a role grants; with ``names``, and its resourceNames
    sorted (empty: any object)."""
    found: set[Any] = set()
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    grant = (group, resource, verb)
                    only = tuple(sorted(rule.get("resourceNames", ())))
                    found.add((*grant, only) if names else grant)
    return found


def bound_roles() -> dict[str, set[tuple[str, str]]]:
    """ServiceAccount name -> the roles (kind, name) bound to it."""
    bound: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for binding in (o for o in rbac() if o["kind"] in BINDING_KINDS):
        [subject] = binding["subjects"]
        assert subject["kind"] == "ServiceAccount"
        assert subject["namespace"] == NAMESPACE
        bound[subject["name"]].add((binding["roleRef"]["kind"], binding["roleRef"]["name"]))
    return bound


def service_grants(service: str) -> set[Grant]:
    every = roles()
    return set().union(*(grants(every[role]) for role in bound_roles()[f"kaiwo-{service}"]))


def writes(service: str) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for group, resource, verb in service_grants(service):
        if verb in WRITE_VERBS:
            found[(group, resource)].add(verb)
    return dict(found)


def test_no_wildcard_and_only_plain_verbs_in_any_role() -> None:
    for (kind, name), role in roles().items():
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule, (kind, name)
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert all("*" not in value for value in rule.get(field, ())), (kind, name, field)
            # No escalate, bind, impersonate, deletecollection...
            assert set(rule["verbs"]) <= ALLOWED_VERBS, (kind, name, rule["verbs"])


def test_resource_names_only_where_the_api_server_honours_them() -> None:
    """A create (the name is not known yet) is never narrowed by name; a list or watch is
    only when the client asks with a ``metadata.name`` field selector: the watcher's CRDs."""
    for (kind, name), role in roles().items():
        for rule in role["rules"]:
            if not rule.get("resourceNames"):
                continue
            assert "create" not in rule["verbs"], (kind, name)
            if {"list", "watch"} & set(rule["verbs"]):
                assert (name, rule["resources"]) == (
                    "kaiwo-watcher",
                    ["customresourcedefinitions"],
                )


def test_each_service_account_is_bound_to_its_own_roles_only() -> None:
    assert bound_roles() == {
        "kaiwo-watcher": {("ClusterRole", "kaiwo-watcher")},
        "kaiwo-executor": {("ClusterRole", "kaiwo-executor")},
        "kaiwo-monitor": {("ClusterRole", "kaiwo-monitor")},
        "kaiwo-gateway": {("ClusterRole", "kaiwo-gateway")},
        "kaiwo-console": {("ClusterRole", "kaiwo-console")},
    }
    # Every role is bound, once, by a binding of the matching scope.
    bindings = [o for o in rbac() if o["kind"] in BINDING_KINDS]
    referenced = [(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings]
    assert sorted(referenced) == sorted(roles())
    for binding in bindings:
        expected = "RoleBinding" if binding["roleRef"]["kind"] == "Role" else "ClusterRoleBinding"
        assert binding["kind"] == expected


def test_the_planner_and_the_recorder_have_no_role_and_no_token() -> None:
    accounts = {o["metadata"]["name"]: o for o in rbac() if o["kind"] == "ServiceAccount"}
    assert sorted(accounts) == [
        "kaiwo-console",
        "kaiwo-executor",
        "kaiwo-gateway",
        "kaiwo-monitor",
        "kaiwo-planner",
        "kaiwo-recorder",
        "kaiwo-watcher",
    ]
    for name in ("kaiwo-planner", "kaiwo-recorder"):
        assert accounts[name]["automountServiceAccountToken"] is False
        assert name not in bound_roles()
    for name in ("kaiwo-watcher", "kaiwo-executor", "kaiwo-monitor", "kaiwo-gateway"):
        assert "automountServiceAccountToken" not in accounts[name]  # in-cluster config


def test_the_gateway_may_only_ask_who_a_caller_is_and_what_they_may_use() -> None:
    """TokenReview and SubjectAccessReview, nothing else: no read of any object, Secrets
    included (no API keys in Secrets, decision 0040), no write."""
    assert service_grants("gateway") == {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }


def test_each_deployment_runs_as_its_own_service_account() -> None:
    deployments = [
        o
        for path in (BASE / "services.yaml", BASE.parent / "scheduler" / "scheduler.yaml")
        for o in documents(path)
        if o["kind"] == "Deployment"
    ]
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == deployment["metadata"]["name"]
        assert "automountServiceAccountToken" not in pod  # the ServiceAccount's setting holds


def test_the_roles_live_in_the_operator_namespace() -> None:
    [kustomization] = documents(BASE / "kustomization.yaml")
    assert kustomization["namespace"] == NAMESPACE
    assert "rbac.yaml" in kustomization["resources"]


def test_the_watcher_reads_exactly_what_it_watches_and_writes_nothing() -> None:
    watched = {(t.resource.group, t.resource.plural) for t in DEFAULT_WATCH_LIST}
    custom = {
        f"{t.resource.plural}.{t.resource.group}"
        for t in DEFAULT_WATCH_LIST
        if t.resource.group not in BUILT_IN_GROUPS
    }
    role = roles()[("ClusterRole", "kaiwo-watcher")]

    assert grants(role, names=True) == {
        *((group, resource, verb, ()) for group, resource in watched for verb in ("list", "watch")),
        ("", "namespaces", "get", ("default", "kube-system")),
        *(
            ("apiextensions.k8s.io", "customresourcedefinitions", verb, tuple(sorted(custom)))
            for verb in ("list", "watch")
        ),
    }
    # GpuWorkloads, RayClusters (0047), Kueue Cohorts (0271) and Gateways (0273)
    assert len(custom) == 20
    assert writes("watcher") == {}


def test_what_the_executor_may_write() -> None:
    assert writes("executor") == EXECUTOR_WRITES


def test_the_executor_writes_the_singletons_and_their_finalizers_by_name() -> None:
    executor = roles()[("ClusterRole", "kaiwo-executor")]
    named = {
        (group, resource, verb): names
        for group, resource, verb, names in grants(executor, names=True)
        if names
    }
    assert named == {
        ("config.kaiwo.silogen.ai", "kaiwoconfigs", "patch"): ("kaiwo",),
        ("kaiwo.silogen.ai", "kaiwoqueueconfigs", "patch"): ("kaiwo",),
        ("kaiwo.silogen.ai", "kaiwoqueueconfigs/finalizers", "update"): ("kaiwo",),
    }
    # Any KaiwoQueueConfig's status: one not named kaiwo is told so there (decision 0210);
    # any KaiwoConfig read: one not named kaiwo is a plan's owner (decision 0209).
    unnamed = grants(executor, names=True)
    assert ("kaiwo.silogen.ai", "kaiwoqueueconfigs/status", "patch", ()) in unnamed
    assert ("config.kaiwo.silogen.ai", "kaiwoconfigs", "get", ()) in unnamed
    # Any Namespace: admission reads the opt-in annotations of a preempted workload's.
    assert ("", "namespaces", "get") in grants(executor)


def test_the_monitor_only_reads_the_cluster() -> None:
    """It leads through the NATS lease bucket, as the planner and the executor do (decision
    0025): no Lease, no Role, no write of any kind."""
    every = roles()
    assert {g[2] for g in grants(every[("ClusterRole", "kaiwo-monitor")])} == {"get", "list"}
    assert not any(kind == "Role" for kind, _ in every)
    assert writes("monitor") == {}
