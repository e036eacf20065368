"""The PodMonitor over the vLLM server Pods of Models (KubeAI's chart option
``metrics.prometheusOperator.vLLMPodMonitor``, decision 0207).

On the real API server, serving PodMonitors from a CRD written for these tests
(tests/fixtures/crds/monitoring.coreos.com_podmonitors.yaml): ``helm install`` with the option
on creates the PodMonitor, which the API server returns with the selector, namespaces, endpoint
and labels written out here; and its selector, as the API server answers ``kubectl get pods
-l``, picks the Pods the planner makes for VLLM Models (built here by the planner itself, not
written out again) and none of those of the other engines, a KubeAI-managed copy, a KaiwoJob's
or KaiwoService's Pod carrying every Model label, or a cached Model's loader.

Without an API server: the chart renders none unless asked, and then exactly one, with the
apiVersion and labels of the values (apiVersions no CRD serves here included); the kustomize
component renders the same object; its endpoint port is the one the planner names on the server
container. helm-sdkpy has no ``helm template``, so these render the chart with Helm's own engine
in lint mode, which runs ``fail`` by logging its message: a probe template added to a copy of
the chart fails with each template's rendering, read back from Helm's log."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from kaiwo_planner.domain.children.labels import inherited_labels
from kaiwo_planner.domain.models.names import SERVER_CONTAINER, SERVER_PORT
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity, WorkloadType

from tests.deploy_manifests import (
    HELM_SDK,
    REPO_ROOT,
    VLLM_POD_MONITOR,
    DeployTree,
    by_kind_and_name,
    helm_sdk,
    kubectl,
    merged,
    shared_deploy_tree,
)
from tests.integration.deploy.test_helm_chart import RELEASE
from tests.integration.deploy.test_on_the_api_server import prepared, run_kubectl, serving_crd
from tests.real_cluster import OPERATOR_NAMESPACE, RealCluster
from tests.unit.planner.models.building import desired, model, models_config, only, plan_for

NAMESPACE: Final = OPERATOR_NAMESPACE
ERROR: Final = 3
"""helm lint's severity of an error."""
RENDERED: Final = re.compile(r"<<<rendered (\S+) (\S*)>>>")
POD_MONITOR_CRD: Final = (
    REPO_ROOT / "tests" / "fixtures" / "crds" / "monitoring.coreos.com_podmonitors.yaml"
)
LINT: Final = """
import asyncio, json, sys
sys.path.append(sys.argv[1])
import helm_sdkpy
config = helm_sdkpy.Configuration(namespace=sys.argv[3])
print(json.dumps(asyncio.run(helm_sdkpy.Lint(config).run(sys.argv[2])), default=str))
"""


def enabled(**fields: Any) -> dict[str, Any]:
    return {"metrics": {"prometheusOperator": {"vLLMPodMonitor": {"enabled": True, **fields}}}}


def chart_rendering(tree: DeployTree, values: dict[str, Any], tmp_path: Path) -> list[Any]:
    """What ``helm template -n kaiwo-system`` would print for ``values`` over the NATS
    credentials: every template of the chart, each included by a probe template whose ``fail``
    carries it (base64) into Helm's log; Helm's lint finds no error in the chart so valued."""
    helm_sdk()  # `make deploy-tools` installed it
    chart = tmp_path / "kaiwo"
    shutil.copytree(tree.chart, chart)
    chart_values = yaml.safe_load((chart / "values.yaml").read_text())
    (chart / "values.yaml").write_text(
        yaml.safe_dump(merged(chart_values, tree.chart_values(values)))
    )
    templates = sorted(p.name for p in (chart / "templates").glob("*.yaml"))
    # Lint leaves the release's namespace empty: the context names it as an install would.
    context = f'(merge (dict "Release" (dict "Namespace" "{NAMESPACE}")) .)'
    (chart / "templates" / "zz-probe.yaml").write_text(
        "".join(
            f'{{{{- fail (printf "<<<rendered %s %s>>>" "{name}" '
            f'(include "kaiwo/templates/{name}" {context} | b64enc)) }}}}\n'
            for name in templates
        )
    )
    result = subprocess.run(
        [sys.executable, "-c", LINT, str(HELM_SDK), str(chart), NAMESPACE],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lint = yaml.safe_load(result.stdout)
    assert [m for m in lint["Messages"] if m["Severity"] >= ERROR] == [], lint
    found = dict(RENDERED.findall(result.stderr))
    assert sorted(found) == templates, "Helm's lint logs no longer carry fail's message"
    return [
        o
        for name in templates
        for o in yaml.safe_load_all(base64.b64decode(found[name]).decode())
        if o
    ]


def pod_monitors(objects: list[Any]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "PodMonitor"]


@pytest.fixture(scope="module")
def tree() -> DeployTree:
    return shared_deploy_tree()


@pytest.fixture(scope="module")
def chart_monitor(tree: DeployTree, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    [monitor] = pod_monitors(chart_rendering(tree, enabled(), tmp_path_factory.mktemp("chart")))
    return monitor


@pytest.fixture(scope="module")
def component_monitor(tree: DeployTree) -> dict[str, Any]:
    [monitor] = pod_monitors(tree.objects(VLLM_POD_MONITOR))
    return monitor


@pytest.fixture(params=["chart", "component"])
def monitor(request: pytest.FixtureRequest) -> dict[str, Any]:
    found: dict[str, Any] = request.getfixturevalue(f"{request.param}_monitor")
    return found


def test_the_chart_renders_no_pod_monitor_unless_asked(tree: DeployTree, tmp_path: Path) -> None:
    production = yaml.safe_load((tree.chart / "values-production.yaml").read_text())
    for name, values in (("default", {}), ("production", production)):
        objects = chart_rendering(tree, values, tmp_path / name)
        assert pod_monitors(objects) == [], name
        assert ("Deployment", "kaiwo-planner") in by_kind_and_name(objects), name


def test_asked_the_chart_renders_one_pod_monitor_with_the_values_api_version_and_labels(
    tree: DeployTree, tmp_path: Path
) -> None:
    values = enabled(
        apiVersion="monitoring.coreos.com/v1alpha9",
        labels={"release": "prometheus", "app.kubernetes.io/name": "theirs"},
    )

    [monitor] = pod_monitors(chart_rendering(tree, values, tmp_path))

    assert monitor["apiVersion"] == "monitoring.coreos.com/v1alpha9"
    assert monitor["metadata"] == {
        "name": "kaiwo-vllm",
        "namespace": NAMESPACE,
        # The chart's own labels stay; the values' are added.
        "labels": {
            "app.kubernetes.io/name": "kaiwo-vllm-metrics",
            "app.kubernetes.io/part-of": "kaiwo",
            "release": "prometheus",
        },
    }


def test_the_component_adds_the_charts_pod_monitor_and_nothing_else(
    tree: DeployTree, chart_monitor: dict[str, Any], component_monitor: dict[str, Any]
) -> None:
    production = by_kind_and_name(tree.objects("overlays/production"))
    with_component = by_kind_and_name(tree.objects(VLLM_POD_MONITOR))

    assert pod_monitors(list(production.values())) == []
    assert set(with_component) - set(production) == {("PodMonitor", "kaiwo-vllm")}
    assert set(production) <= set(with_component)
    assert component_monitor == chart_monitor


VLLM_MODELS: Final = {
    "hf": {"url": "hf://meta-llama/Llama-3.1-8B-Instruct", "engine": "VLLM", "replicas": 1},
    "adapters": {
        "url": "hf://meta-llama/Llama-3.1-8B",
        "engine": "VLLM",
        "adapters": [{"name": "sql", "url": "hf://org/sql-lora"}],
        "replicas": 1,
    },
}
OTHER_ENGINES: Final = {
    "ollama": {"url": "ollama://qwen2:0.5b", "engine": "OLlama", "replicas": 1},
    "infinity": {"url": "hf://BAAI/bge-small-en-v1.5", "engine": "Infinity", "replicas": 1},
    "fasterwhisper": {
        "url": "hf://Systran/faster-whisper-medium.en",
        "engine": "FasterWhisper",
        "replicas": 1,
    },
}


def test_the_endpoint_port_is_the_one_the_planner_names_on_the_vllm_server(
    monitor: dict[str, Any],
) -> None:
    """The endpoint's port: the server container's, the one vLLM serves /metrics on, in the
    Pods the planner makes for VLLM Models."""
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    for case, spec in sorted(VLLM_MODELS.items()):
        pod = only(plan_for(model(spec)), "Pod")
        named = {
            (container["name"], port["containerPort"])
            for container in pod["spec"]["containers"]
            for port in container.get("ports", [])
            if port.get("name") == endpoint["port"]
        }
        assert named == {(SERVER_CONTAINER, SERVER_PORT)}, case
        assert pod["metadata"]["annotations"]["model-pod-port"] == str(SERVER_PORT), case


# ------------------------------------------------------------------ on the real API server


def serving_pod_monitors(real_cluster: RealCluster) -> RealCluster:
    """:func:`prepared`'s API server (ServiceMonitors, kaiwo-system), also serving PodMonitors."""
    prepared(real_cluster)
    serving_crd(real_cluster, POD_MONITOR_CRD, "podmonitors.monitoring.coreos.com")
    return real_cluster


async def uninstalled(cluster: RealCluster) -> None:
    """No release of the chart left behind (as test_helm_chart's ``cluster``)."""
    helm = helm_sdk()
    config = helm.Configuration(namespace=OPERATOR_NAMESPACE, kubeconfig=str(cluster.kubeconfig))
    releases = await helm.List(config).run(all=True)
    if any(release["name"] == RELEASE for release in releases or []):
        await helm.Uninstall(config).run(RELEASE, wait=False)


async def install_enabled(cluster: RealCluster, tree: DeployTree) -> dict[str, Any]:
    """``helm install`` (not waiting for pods: no kubelet runs) with the option on and the label
    kube-prometheus-stack selects by, then the PodMonitor as the API server returns it."""
    helm = helm_sdk()
    config = helm.Configuration(namespace=OPERATOR_NAMESPACE, kubeconfig=str(cluster.kubeconfig))
    values = tree.chart_values(enabled(labels={"release": "prometheus"}))
    await helm.Install(config).run(RELEASE, str(tree.chart), values=values, wait=False,
                                   timeout=120, take_ownership=True)  # fmt: skip
    text = await asyncio.to_thread(
        run_kubectl, cluster, "-n", OPERATOR_NAMESPACE, "get",
        "podmonitors.monitoring.coreos.com", "kaiwo-vllm", "-o", "json",
    )  # fmt: skip
    found: dict[str, Any] = json.loads(text)
    return found


@pytest.fixture(scope="module")
def installed_monitor(real_cluster: RealCluster, tree: DeployTree) -> Iterator[dict[str, Any]]:
    """The chart installed once for this module's API server tests, uninstalled after."""
    cluster = serving_pod_monitors(real_cluster)
    try:
        yield asyncio.run(install_enabled(cluster, tree))
    finally:
        asyncio.run(uninstalled(cluster))


@pytest.mark.k8s
@pytest.mark.timeout(240)
def test_the_api_server_holds_the_installed_pod_monitor_over_the_vllm_servers_port(
    installed_monitor: dict[str, Any],
) -> None:
    assert installed_monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert installed_monitor["metadata"]["namespace"] == OPERATOR_NAMESPACE
    assert installed_monitor["metadata"]["labels"] == {
        "app.kubernetes.io/name": "kaiwo-vllm-metrics",
        "app.kubernetes.io/part-of": "kaiwo",
        "app.kubernetes.io/managed-by": "Helm",
        "release": "prometheus",
    }
    assert installed_monitor["spec"] == {
        "namespaceSelector": {"any": True},
        "podMetricsEndpoints": [{"port": "http", "path": "/metrics"}],
        "selector": {
            "matchLabels": {
                "app": "model",
                "app.kubernetes.io/managed-by": "kaiwo",
                "app.kubernetes.io/name": "vllm",
            },
            "matchExpressions": [
                {"key": "model", "operator": "Exists"},
                {"key": "kaiwo.silogen.ai/type", "operator": "DoesNotExist"},
            ],
        },
    }


def label_selector(selector: dict[str, Any]) -> str:
    """``selector`` (a LabelSelector) as ``kubectl get -l`` takes it."""
    terms = [f"{key}={value}" for key, value in selector.get("matchLabels", {}).items()]
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        values = ",".join(expression.get("values", []))
        terms.append(
            {
                "Exists": key,
                "DoesNotExist": f"!{key}",
                "In": f"{key} in ({values})",
                "NotIn": f"{key} notin ({values})",
            }[operator]
        )
    return ",".join(terms)


def creatable(name: str, labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    """A Pod the API server creates with ``labels`` and the planner's ``spec``: no owner (the
    garbage collector would remove a Pod whose owner never existed)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def planned_pods() -> list[dict[str, Any]]:
    """The planner's server Pods of VLLM Models (``vllm-*``) and the Pods no vLLM PodMonitor
    may scrape: the other engines' servers, a copy managed by a KubeAI beside the operator, a
    KaiwoService's and a KaiwoJob's Pod whose template carries every label of a Model's server
    Pod (the planner still adds its system labels), and a cached Model's loader."""
    pods = []
    for case, spec in sorted(VLLM_MODELS.items()):
        pod = only(plan_for(model(spec, name=case)), "Pod")
        pods.append(creatable(f"vllm-{case}", pod["metadata"]["labels"], pod["spec"]))
    for case, spec in sorted(OTHER_ENGINES.items()):
        pod = only(plan_for(model(spec, name=case)), "Pod")
        pods.append(creatable(case, pod["metadata"]["labels"], pod["spec"]))
    server = only(plan_for(model(VLLM_MODELS["hf"])), "Pod")
    labels = server["metadata"]["labels"]
    pods.append(
        creatable("kubeai", {**labels, "app.kubernetes.io/managed-by": "kubeai"}, server["spec"])
    )
    workloads: tuple[tuple[str, WorkloadType], ...] = (
        ("KaiwoService", "service"),
        ("KaiwoJob", "job"),
    )
    for kind, workload_type in workloads:
        owner = WorkloadIdentity(
            api_version="kaiwo.silogen.ai/v1alpha1",
            kind=kind,
            name="llm",
            namespace="ai",
            uid=f"u-{workload_type}",
            workload_type=workload_type,
        )
        pods.append(
            creatable(f"kaiwo-{workload_type}", inherited_labels(labels, owner), server["spec"])
        )
    config = models_config(
        "cacheProfiles:\n  fast:\n    sharedFilesystem: {storageClassName: nfs-rwx}\n"
    )
    cached = {**VLLM_MODELS["hf"], "url": "gs://bucket/llama", "cacheProfile": "fast"}
    finalized = model(cached, finalizers=["kubeai.org/cache-eviction"])
    jobs = desired(plan_for(finalized, config), "Job")
    assert jobs, "the Model's cache is loaded by a Job"
    for index, job in enumerate(jobs):
        template = job["spec"]["template"]
        pods.append(
            creatable(
                f"cache-loader-{index}", template.get("metadata", {}).get("labels", {}),
                template["spec"],
            )
        )  # fmt: skip
    return pods


@pytest.fixture
def workload_namespace(real_cluster: RealCluster) -> Iterator[str]:
    """A fresh namespace, its default ServiceAccount there (Pods are admitted only then),
    deleted after."""
    name = f"vllm-monitor-{uuid.uuid4().hex[:8]}"
    run_kubectl(real_cluster, "create", "namespace", name)
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(
            [kubectl(), "--kubeconfig", str(real_cluster.kubeconfig), "-n", name, "get",
             "serviceaccount", "default"],
            capture_output=True, check=False,
        ).returncode:  # fmt: skip
            assert time.monotonic() < deadline, f"no default ServiceAccount in {name}"
            time.sleep(0.5)
        yield name
    finally:
        run_kubectl(real_cluster, "delete", "namespace", name, "--wait=false")


@pytest.mark.k8s
@pytest.mark.timeout(240)
def test_on_the_api_server_the_selector_picks_exactly_the_vllm_server_pods_of_models(
    installed_monitor: dict[str, Any], real_cluster: RealCluster, workload_namespace: str
) -> None:
    pods = planned_pods()
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    run_kubectl(real_cluster, "-n", workload_namespace, "create", "-f", "-", stdin=listed)
    selector = label_selector(installed_monitor["spec"]["selector"])

    every = run_kubectl(real_cluster, "-n", workload_namespace, "get", "pods", "-o", "name")
    picked = run_kubectl(
        real_cluster, "-n", workload_namespace, "get", "pods", "-l", selector, "-o", "name"
    )

    assert sorted(every.split()) == sorted(f"pod/{p['metadata']['name']}" for p in pods)
    assert sorted(picked.split()) == [f"pod/vllm-{case}" for case in sorted(VLLM_MODELS)]
