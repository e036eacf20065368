"""KaiwoService (ray: true or rayService given) -> a RayService wrapped in an AppWrapper."""

from __future__ import annotations

from kaiwo_planner.domain.children.workload_children import plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation

SERVE_CONFIG = "applications:\n  - name: echo\n    import_path: echo:app\n"
NO_GPUS = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")


def test_default_ray_service_matches_the_hand_written_app_wrapper(
    make_service, expected, assert_manifests
):
    service = make_service({"ray": True, "serveConfigV2": SERVE_CONFIG, "clusterQueue": "serving"})

    decision = plan_children(workload=service, allocation=NO_GPUS, config=None)

    assert_manifests(list(decision.desired), expected("ray_service_app_wrapper"))
    assert decision.main_child is not None
    assert decision.main_child.display() == "AppWrapper/team-a/chat"


def test_every_worker_group_is_a_pod_set_sized_by_the_allocation(make_service):
    group = {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "w"}]}}}
    ray_service = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "spec": {
            "serveConfigV2": "applications: []\n",
            "rayClusterConfig": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "h"}]}},
                },
                "workerGroupSpecs": [
                    {**group, "groupName": "a"},
                    # Each replica on 2 pods: declared as such (decision 0151).
                    {**group, "groupName": "b", "numOfHosts": 2},
                ],
            },
        },
    }
    allocation = GpuAllocation(gpus=24, gpus_per_replica=8, replicas=3, vendor="amd")

    (wrapper,) = plan_children(
        workload=make_service({"rayService": ray_service, "gpus": 24}),
        allocation=allocation,
        config=None,
    ).desired

    component = wrapper["spec"]["components"][0]
    assert component["podSets"] == [
        {"replicas": 1, "path": "template.spec.rayClusterConfig.headGroupSpec.template"},
        {"replicas": 3, "path": "template.spec.rayClusterConfig.workerGroupSpecs[0].template"},
        {"replicas": 6, "path": "template.spec.rayClusterConfig.workerGroupSpecs[1].template"},
    ]
    # The user's serve config stays when the workload gives none of its own.
    assert component["template"]["spec"]["serveConfigV2"] == "applications: []\n"


def test_a_gateway_routes_to_the_ray_serve_service(make_service, make_namespace_config):
    namespace_config = make_namespace_config({"gateway": {"name": "gw", "namespace": "infra"}})

    desired = plan_children(
        workload=make_service({"ray": True}),
        allocation=NO_GPUS,
        config=None,
        namespace_config=namespace_config,
    ).desired

    assert [obj["kind"] for obj in desired] == ["HTTPRoute", "AppWrapper"]
    route = desired[0]
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "chat-serve-svc", "port": 8000}]
