"""Every rendering of deploy/k8s passes a server-side dry run on the real API server (our CRDs,
the third-party ones and a ServiceMonitor CRD installed), and each deployed ServiceAccount may
do what its service needs, and not more, as the API server's authorizer answers
(SubjectAccessReview) once the production overlay's RBAC is applied."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from kaiwo_watcher.watch_list import DEFAULT_WATCH_LIST

from tests.deploy_manifests import (
    EXTERNAL_SCHEDULER,
    KUSTOMIZATIONS,
    REPO_ROOT,
    DeployTree,
    kubectl,
    shared_deploy_tree,
)
from tests.real_cluster import OPERATOR_NAMESPACE, RealCluster
from tests.unit.deploy.test_rbac import EXECUTOR_WRITES

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(180)]

SERVICE_MONITOR_CRD: Final = (
    REPO_ROOT / "tests" / "fixtures" / "crds" / "monitoring.coreos.com_servicemonitors.yaml"
)
FIELD_MANAGER: Final = "kaiwo-deploy-tests"
RBAC_KINDS: Final = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
WORKLOAD_NAMESPACE: Final = "ml-team"
"""Any namespace: the services' cluster roles hold in every one."""


def run_kubectl(cluster: RealCluster, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [kubectl(), "--kubeconfig", str(cluster.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def active_namespace(cluster: RealCluster, name: str) -> None:
    """``name`` exists and is not being deleted (another test may have just removed it)."""
    deadline = time.monotonic() + 60
    while True:
        found = subprocess.run(
            [kubectl(), "--kubeconfig", str(cluster.kubeconfig), "get", "namespace", name,
             "-o", "jsonpath={.status.phase}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if found.returncode != 0:
            run_kubectl(cluster, "create", "namespace", name)
            return
        if found.stdout == "Active":
            return
        assert time.monotonic() < deadline, f"namespace {name} stays {found.stdout}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def tree() -> DeployTree:
    return shared_deploy_tree()


def prepared(real_cluster: RealCluster) -> RealCluster:
    """The session's API server, also serving ServiceMonitors, with kaiwo-system there."""
    serving_crd(real_cluster, SERVICE_MONITOR_CRD, "servicemonitors.monitoring.coreos.com")
    active_namespace(real_cluster, OPERATOR_NAMESPACE)
    return real_cluster


def serving_crd(real_cluster: RealCluster, crd: Path, name: str) -> None:
    """The CRD ``name`` (in the file ``crd``) applied, and served once it is established."""
    run_kubectl(
        real_cluster, "apply", "--server-side", "--field-manager", FIELD_MANAGER, "-f", str(crd)
    )
    run_kubectl(
        real_cluster, "wait", "--for", "condition=Established", "--timeout", "60s", f"crd/{name}"
    )


@pytest.fixture(scope="module")
def cluster(real_cluster: RealCluster) -> RealCluster:
    return prepared(real_cluster)


def dry_run(cluster: RealCluster, manifest: str) -> subprocess.CompletedProcess[str]:
    """What the API server would make of ``manifest``. ``--force-conflicts``: fields another
    test of the session's API server applied under its own name are not this check's concern
    (nothing is written)."""
    return subprocess.run(
        [kubectl(), "--kubeconfig", str(cluster.kubeconfig), "apply", "--server-side",
         "--dry-run=server", "--force-conflicts", "--field-manager", FIELD_MANAGER, "-f", "-"],
        input=manifest, capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("name", [*KUSTOMIZATIONS, EXTERNAL_SCHEDULER])
def test_the_kustomize_rendering_passes_a_server_side_dry_run(
    cluster: RealCluster, tree: DeployTree, name: str
) -> None:
    rendered = tree.kustomize(name)
    result = dry_run(cluster, rendered)

    assert result.returncode == 0, result.stderr
    kinds = {o["kind"] for o in yaml.safe_load_all(rendered) if o}
    applied = result.stdout.count("serverside-applied (server dry run)")
    assert applied == len([o for o in yaml.safe_load_all(rendered) if o])
    expected = {"Deployment", "ConfigMap", "ClusterRoleBinding"}
    if name != "scheduler":
        expected |= {"StatefulSet", "NetworkPolicy", "ClusterRole"}
    assert expected <= kinds


def test_the_dry_run_refuses_what_the_api_server_would_refuse(cluster: RealCluster) -> None:
    """The check is live: an invalid object fails it."""
    broken = yaml.safe_dump(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "kaiwo-watcher", "namespace": OPERATOR_NAMESPACE},
            "spec": {"minAvailable": 1, "maxUnavailable": 1, "selector": {}},
        }
    )
    result = dry_run(cluster, broken)
    assert result.returncode != 0
    assert "minAvailable" in result.stderr


# ------------------------------------------------------------------ permissions


def review(user: str, *, verb: str, group: str, resource: str, name: str = "",
           namespace: str = WORKLOAD_NAMESPACE) -> dict[str, Any]:  # fmt: skip
    plural, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": plural, "namespace": namespace}
    if subresource:
        attributes["subresource"] = subresource
    if name:
        attributes["name"] = name
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups_of(user), "resourceAttributes": attributes},
    }


def groups_of(user: str) -> list[str]:
    return ["system:serviceaccounts", f"system:serviceaccounts:{OPERATOR_NAMESPACE}",
            "system:authenticated"] if user.startswith("system:serviceaccount:") else []  # fmt: skip


def account(service: str) -> str:
    return f"system:serviceaccount:{OPERATOR_NAMESPACE}:kaiwo-{service}"


def answers(cluster: RealCluster, reviews: list[dict[str, Any]]) -> list[bool]:
    """The authorizer's answer to each review, asked in one request list."""
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": reviews})
    text = run_kubectl(cluster, "create", "-o", "json", "-f", "-", stdin=listed)
    decoder = json.JSONDecoder()
    items, index = [], 0
    while index < len(text.rstrip()):  # one JSON document per review, back to back
        item, index = decoder.raw_decode(text, index)
        items.append(item)
        while index < len(text) and text[index].isspace():
            index += 1
    return [bool(item["status"].get("allowed")) for item in items]


def expected_reviews() -> list[tuple[dict[str, Any], bool]]:
    checks: list[tuple[dict[str, Any], bool]] = []
    executor = account("executor")
    for (group, resource), verbs in EXECUTOR_WRITES.items():
        for verb in sorted(verbs):
            # Named grants are the singletons `kaiwo`; a name never narrows an unnamed grant.
            checks.append((review(executor, verb=verb, group=group, resource=resource,
                                  name="kaiwo"), True))  # fmt: skip
    checks += [
        (review(executor, verb="get", group="", resource="secrets"), False),
        (review(executor, verb="create", group="", resource="serviceaccounts"), False),
        (review(executor, verb="delete", group="", resource="nodes"), False),
        (review(executor, verb="create", group="rbac.authorization.k8s.io",
                resource="clusterroles"), False),  # fmt: skip
    ]
    watcher = account("watcher")
    for target in DEFAULT_WATCH_LIST:
        group, plural = target.resource.group, target.resource.plural
        for verb in ("list", "watch"):
            checks.append((review(watcher, verb=verb, group=group, resource=plural), True))
        checks.append((review(watcher, verb="create", group=group, resource=plural), False))
    checks.append((review(watcher, verb="get", group="", resource="secrets"), False))
    monitor = account("monitor")
    checks += [
        (review(monitor, verb="list", group="", resource="pods"), True),
        (review(monitor, verb="get", group="config.kaiwo.silogen.ai", resource="kaiwoconfigs",
                name="kaiwo"), True),  # fmt: skip
        # It leads through the NATS lease bucket (decision 0025): no Lease of its own.
        (review(monitor, verb="create", group="coordination.k8s.io", resource="leases",
                namespace=OPERATOR_NAMESPACE), False),  # fmt: skip
        (review(monitor, verb="update", group="coordination.k8s.io", resource="leases",
                name="kaiwo-monitor", namespace=OPERATOR_NAMESPACE), False),  # fmt: skip
        (review(monitor, verb="patch", group="", resource="pods"), False),
    ]
    for service in ("planner", "recorder"):
        checks += [
            (review(account(service), verb="list", group="", resource="pods"), False),
            (review(account(service), verb="get", group="", resource="namespaces",
                    name="default", namespace=""), False),  # fmt: skip
        ]
    # The gateway asks who a caller is and what they may use, and nothing else (decision 0040).
    gateway = account("gateway")
    checks += [
        (review(gateway, verb="create", group="authentication.k8s.io", resource="tokenreviews",
                namespace=""), True),  # fmt: skip
        (review(gateway, verb="create", group="authorization.k8s.io",
                resource="subjectaccessreviews", namespace=""), True),  # fmt: skip
        (review(gateway, verb="get", group="", resource="secrets"), False),
        (review(gateway, verb="get", group="kubeai.org", resource="models"), False),
        (review(gateway, verb="list", group="", resource="pods"), False),
        (review(gateway, verb="create", group="authorization.k8s.io",
                resource="localsubjectaccessreviews"), False),  # fmt: skip
    ]
    scheduler = account("scheduler")
    checks += [
        (review(scheduler, verb="create", group="", resource="pods/binding"), True),
        (review(scheduler, verb="watch", group="", resource="pods"), True),
        (review(scheduler, verb="list", group="", resource="nodes", namespace=""), True),
        (review(scheduler, verb="create", group="events.k8s.io", resource="events"), True),
        (review(scheduler, verb="list", group="", resource="persistentvolumeclaims"), True),
        (review(scheduler, verb="get", group="coordination.k8s.io", resource="leases",
                name="kaiwo-scheduler", namespace=OPERATOR_NAMESPACE), True),  # fmt: skip
        (review(scheduler, verb="update", group="coordination.k8s.io", resource="leases",
                name="kaiwo-scheduler", namespace=OPERATOR_NAMESPACE), True),  # fmt: skip
        (review(scheduler, verb="get", group="", resource="secrets"), False),
    ]
    return checks


def test_each_service_account_may_do_what_its_service_needs_and_no_more(
    cluster: RealCluster, tree: DeployTree, tmp_path: Path
) -> None:
    rbac = [o for o in tree.objects("overlays/production") if o["kind"] in RBAC_KINDS]
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(yaml.safe_dump_all(rbac))
    run_kubectl(cluster, "apply", "--server-side", "--force-conflicts",
                "--field-manager", FIELD_MANAGER, "-f", str(manifest))  # fmt: skip
    try:
        checks = expected_reviews()
        got = answers(cluster, [request for request, _ in checks])
    finally:
        run_kubectl(cluster, "delete", "--ignore-not-found", "--wait=false", "-f", str(manifest))

    wrong = [
        (request["spec"]["user"].rsplit(":", 1)[1], request["spec"]["resourceAttributes"], want)
        for (request, want), allowed in zip(checks, got, strict=True)
        if allowed != want
    ]
    assert wrong == []
    assert len(checks) > 100
