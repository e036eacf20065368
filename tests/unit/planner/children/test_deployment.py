"""KaiwoService (ray: false) -> apps/v1 Deployment (+ Service and HTTPRoute with a gateway)."""

from __future__ import annotations

from kaiwo_planner.domain.children.workload_children import plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation

TWO_NVIDIA = GpuAllocation(
    gpus=2, gpus_per_replica=1, replicas=2, vendor="nvidia", rule="over-replicas"
)
NO_GPUS = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=3, vendor="amd")


def test_deployment_in_a_gateway_namespace_matches_the_hand_written_manifests(
    make_service, make_namespace_config, expected, assert_manifests
):
    service = make_service(
        {
            "user": "ops@example.com",
            "gpus": 2,
            "gpuVendor": "nvidia",
            "image": "vllm/vllm-openai:v0.9",
            "imagePullSecrets": [{"name": "own-secret"}],
            "entrypoint": "vllm serve model --port 8000",
        }
    )
    namespace_config = make_namespace_config(
        {
            "gateway": {"name": "kgw-default", "namespace": "gateway-system"},
            "credentials": {"huggingFaceToken": {"secretName": "hf-creds", "secretKey": "token"}},
            "images": {"imagePullSecrets": ["aim-regcred", "own-secret"]},
        }
    )

    decision = plan_children(
        workload=service,
        allocation=TWO_NVIDIA,
        config=None,
        namespace_config=namespace_config,
    )

    assert_manifests(list(decision.desired), expected("deployment_with_gateway"))
    assert decision.main_child is not None
    assert decision.main_child.display() == "Deployment/team-a/chat"


def test_user_deployment_keeps_its_strategy_and_port_and_gets_replicas(make_service):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"tier": "web"}},
            "template": {
                "metadata": {"labels": {"tier": "web"}},
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx", "ports": [{"containerPort": 8080}]}
                    ]
                },
            },
        },
    }
    service = make_service(
        {"deployment": deployment, "replicas": 3, "podTemplateSpecLabels": {"extra": "x"}}
    )

    (manifest,) = plan_children(workload=service, allocation=NO_GPUS, config=None).desired

    spec = manifest["spec"]
    assert spec["strategy"] == {"type": "Recreate"}
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": {"tier": "web", "app": "chat"}}
    assert spec["template"]["metadata"]["labels"] == {
        "tier": "web",
        "extra": "x",
        "app": "chat",
        "kueue.x-k8s.io/queue-name": "kaiwo",
        "kaiwo.silogen.ai/user": "",
        "kaiwo.silogen.ai/name": "chat",
        "kaiwo.silogen.ai/type": "service",
        "kaiwo.silogen.ai/run-id": "uid-2",
    }
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert "schedulerName" not in spec["template"]["spec"]


def test_a_declared_container_port_becomes_the_route_backend_port(
    make_service, make_namespace_config
):
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "web", "ports": [{"containerPort": 8080}]}]}
            }
        },
    }
    namespace_config = make_namespace_config({"gateway": {"name": "gw"}})

    desired = plan_children(
        workload=make_service({"deployment": deployment}),
        allocation=NO_GPUS,
        config=None,
        namespace_config=namespace_config,
    ).desired

    route = next(obj for obj in desired if obj["kind"] == "HTTPRoute")
    service = next(obj for obj in desired if obj["kind"] == "Service")
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "gw",
            "namespace": "team-a",
        }
    ]
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "chat", "port": 8080}]
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}
    ]


def test_without_a_namespace_config_there_is_no_service_or_route(make_service):
    desired = plan_children(workload=make_service(), allocation=NO_GPUS, config=None).desired

    assert [obj["kind"] for obj in desired] == ["Deployment"]


def test_a_user_deployment_that_names_no_container_runs_kaiwos_default_template(make_service):
    """``deployment: {spec: {strategy: ...}}`` sets a Deployment parameter only: the image and
    entrypoint go into Kaiwo's own template (decision 0136), not into a pod with no container."""
    spec = {"image": "vllm/vllm-openai:v0.8.5", "entrypoint": "vllm serve m"}
    (default,) = plan_children(workload=make_service(spec), allocation=NO_GPUS, config=None).desired
    strategy = {"type": "Recreate"}
    given = {**spec, "deployment": {"spec": {"strategy": strategy}}}

    (manifest,) = plan_children(
        workload=make_service(given), allocation=NO_GPUS, config=None
    ).desired

    assert manifest["spec"] == {**default["spec"], "strategy": strategy}
