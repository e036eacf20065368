"""KaiwoJob (ray: true or rayJob given) -> ray.io/v1 RayJob."""

from __future__ import annotations

from kaiwo_planner.domain.children.workload_children import plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation

SIXTEEN_AMD = GpuAllocation(gpus=16, gpus_per_replica=8, replicas=2, vendor="amd")


def test_default_ray_job_matches_the_hand_written_manifest(
    make_job, make_config, expected, assert_manifests
):
    job = make_job({"ray": True, "gpus": 16, "entrypoint": "python -m train \\\n --fast\n"})
    config = make_config({"ray": {"headPodMemory": "1Gi"}})

    decision = plan_children(workload=job, allocation=SIXTEEN_AMD, config=config)

    assert_manifests(list(decision.desired), expected("ray_job_default"))
    assert decision.main_child is not None
    assert decision.main_child.display() == "RayJob/team-a/train"


def test_user_ray_job_sizes_every_worker_group_and_keeps_its_own_settings(make_job):
    worker = {
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "w", "image": "my-ray:1"}]}},
    }
    ray_job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "spec": {
            "entrypoint": "python old.py",
            "backoffLimit": 2,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "h"}]}},
                },
                "workerGroupSpecs": [
                    {**worker, "groupName": "a", "replicas": 5, "maxReplicas": 9},
                    {**worker, "groupName": "b"},
                ],
            },
        },
    }
    job = make_job(
        {"rayJob": ray_job, "gpus": 16, "entrypoint": "python new.py", "image": "mine:2"}
    )

    (manifest,) = plan_children(workload=job, allocation=SIXTEEN_AMD, config=None).desired

    spec = manifest["spec"]
    assert spec["entrypoint"] == "python new.py"
    assert spec["backoffLimit"] == 2
    # Left out by the user: set, as Kueue admits a queued RayJob only so (decision 0151).
    assert spec["shutdownAfterJobFinishes"] is True
    groups = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert [
        (g["groupName"], g["replicas"], g["minReplicas"], g["maxReplicas"]) for g in groups
    ] == [
        ("a", 2, 2, 2),
        ("b", 2, 2, 2),
    ]
    worker_container = groups[1]["template"]["spec"]["containers"][0]
    assert worker_container["image"] == "my-ray:1"
    # A user-provided spec gets no per-GPU CPU/memory defaults, only the base ones.
    assert worker_container["resources"] == {
        "requests": {"cpu": "2", "memory": "16Gi", "amd.com/gpu": "8"},
        "limits": {"cpu": "2", "memory": "16Gi", "amd.com/gpu": "8"},
    }
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert head["containers"][0]["image"] == "mine:2"
    assert head["containers"][0]["resources"] == {
        "requests": {"cpu": "2", "memory": "16Gi"},
        "limits": {"cpu": "2", "memory": "16Gi"},
    }
    assert "schedulerName" not in head
    assert "securityContext" not in head


def test_an_existing_ray_job_leaves_suspend_to_kueue(make_job):
    job = make_job({"ray": True})
    allocation = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")
    observed = {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"suspend": False}}

    (manifest,) = plan_children(
        workload=job, allocation=allocation, config=None, observed_main_child=observed
    ).desired

    assert "suspend" not in manifest["spec"]


def test_a_ray_group_that_names_no_container_runs_kaiwos_default_template(make_job):
    """A user's Ray cluster whose groups set only Ray parameters: each pod is Kaiwo's own
    template for its role (decision 0136), not one with no container."""
    (default,) = plan_children(
        workload=make_job({"ray": True, "gpus": 16}), allocation=SIXTEEN_AMD, config=None
    ).desired
    cluster = default["spec"]["rayClusterSpec"]
    bare = {
        "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}},
        "workerGroupSpecs": [{"groupName": "gpu", "rayStartParams": {}, "template": {}}],
    }
    given = {"ray": True, "gpus": 16, "rayJob": {"spec": {"rayClusterSpec": bare}}}

    (manifest,) = plan_children(
        workload=make_job(given), allocation=SIXTEEN_AMD, config=None
    ).desired

    made = manifest["spec"]["rayClusterSpec"]
    assert made["headGroupSpec"]["template"] == cluster["headGroupSpec"]["template"]
    assert made["workerGroupSpecs"][0]["template"] == cluster["workerGroupSpecs"][0]["template"]


def test_a_ray_job_without_a_cluster_gets_kaiwos_default_cluster(make_job):
    """``rayJob: {}`` names neither a cluster nor ``clusterSelector``: KubeRay (and Kueue's
    webhook) cannot run it, so it gets Kaiwo's default cluster, as ``ray: true`` does
    (decision 0151)."""
    job = make_job({"rayJob": {}, "gpus": 16})

    (manifest,) = plan_children(workload=job, allocation=SIXTEEN_AMD, config=None).desired

    spec = manifest["spec"]
    assert spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is False
    assert cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["name"] == "ray-head"
    [group] = cluster["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"]) == ("default-worker-group", 2)
    [worker] = group["template"]["spec"]["containers"]
    assert worker["name"] == "ray-worker"
    assert worker["resources"]["limits"]["amd.com/gpu"] == "8"


def test_a_ray_job_on_an_existing_cluster_is_left_without_one(make_job):
    """``clusterSelector``: the RayJob runs on a cluster that exists; Kaiwo adds no cluster
    and leaves ``shutdownAfterJobFinishes`` as given (none)."""
    selector = {"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}
    job = make_job({"rayJob": selector, "gpus": 16})

    (manifest,) = plan_children(workload=job, allocation=SIXTEEN_AMD, config=None).desired

    assert "rayClusterSpec" not in manifest["spec"]
    assert "shutdownAfterJobFinishes" not in manifest["spec"]
    assert manifest["spec"]["clusterSelector"] == {"ray.io/cluster": "shared"}


def test_a_ray_job_on_an_existing_cluster_is_neither_queued_nor_suspended(make_job):
    """Kueue does not manage a RayJob on an existing cluster, yet its webhook suspends one
    that carries a queue label, and KubeRay refuses a suspended RayJob in that mode: no Kueue
    label, and ``suspend: false``, even over the user's ``true`` (decision 0156)."""
    selector = {"spec": {"clusterSelector": {"ray.io/cluster": "shared"}, "suspend": True}}
    job = make_job({"rayJob": selector, "gpus": 16, "priorityClass": "high"})

    (manifest,) = plan_children(workload=job, allocation=SIXTEEN_AMD, config=None).desired

    assert manifest["spec"]["suspend"] is False
    labels = manifest["metadata"]["labels"]
    assert "kueue.x-k8s.io/queue-name" not in labels, labels
    assert "kueue.x-k8s.io/priority-class" not in labels, labels
    assert labels["kaiwo.silogen.ai/name"] == "train"


def test_a_ray_job_with_its_own_cluster_is_queued_suspended(make_job):
    job = make_job({"rayJob": {}, "gpus": 16})

    (manifest,) = plan_children(workload=job, allocation=SIXTEEN_AMD, config=None).desired

    assert manifest["spec"]["suspend"] is True
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"


def test_a_shutdown_the_user_sets_is_kept(make_job):
    job = make_job({"rayJob": {"spec": {"shutdownAfterJobFinishes": True}}, "gpus": 16})

    (manifest,) = plan_children(workload=job, allocation=SIXTEEN_AMD, config=None).desired

    assert manifest["spec"]["shutdownAfterJobFinishes"] is True
