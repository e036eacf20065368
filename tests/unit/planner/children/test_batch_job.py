"""KaiwoJob (ray: false) -> batch/v1 Job, checked against hand-written manifests."""

from __future__ import annotations

from kaiwo_contracts.plans import canonical_json
from kaiwo_planner.domain.children.workload_children import ChildCondition, plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.state.priority_classes import PriorityChoice

NO_GPUS = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")


def test_default_template_job_matches_the_hand_written_manifest(make_job, expected):
    job = make_job(
        {
            "user": "Jane.Doe@Example.com",
            "entrypoint": "#!/bin/bash\necho start\n  python train.py \\\n  --lr 0.1\n",
            "image": "busybox:1",
            "env": [{"name": "FOO", "value": "bar"}],
            "imagePullSecrets": [{"name": "regcred"}],
            "secretVolumes": [
                {
                    "name": "creds",
                    "secretName": "s3-creds",
                    "key": "token",
                    "subPath": "token.txt",
                    "mountPath": "/secrets",
                }
            ],
            "podTemplateSpecLabels": {"tier": "batch", "kaiwo.silogen.ai/name": "spoofed"},
            "clusterQueue": "research",
            "priorityClass": "high",
            "requiredTopologyLabel": "kaiwo/topology-rack",
            "preferredTopologyLabel": "kaiwo/topology-block",
        },
        name="hello",
        metadata={
            "labels": {"team": "ml", "kueue.x-k8s.io/queue-name": "not-copied"},
            "annotations": {
                "note": "keep me",
                "kubectl.kubernetes.io/last-applied-configuration": "{...}",
                "kubectl.kubernetes.io/default-container": "main",
            },
        },
    )

    # "high" is both a PriorityClass and a WorkloadPriorityClass in the cluster.
    both = PriorityChoice(pod_priority_class="high", kueue_priority_class="high")
    decision = plan_children(workload=job, allocation=NO_GPUS, config=None, priority=both)

    assert list(decision.desired) == expected("batch_job_default")
    assert decision.main_child is not None
    assert decision.main_child.display() == "Job/team-a/hello"
    assert decision.prune_selector == {
        "app.kubernetes.io/managed-by": "kaiwo",
        "kaiwo.silogen.ai/owner-uid": "uid-1",
    }
    # Created from the spec as it is: nothing left unapplied, from the first plan on.
    assert decision.conditions == (
        ChildCondition(
            "ChildSpecApplied", "True", "Applied", "The Job matches the workload's spec"
        ),
    )
    assert decision.notes == ()


def test_user_job_spec_is_the_base_and_only_gets_defaults_it_lacks(make_job, make_config):
    user_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "ignored", "labels": {"ignored": "yes"}},
        "spec": {
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 123,
            "template": {
                "spec": {
                    "restartPolicy": "OnFailure",
                    "initContainers": [{"name": "init", "image": "alpine"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "pytorch:2",
                            "args": ["--epochs", "1"],
                            "resources": {"limits": {"cpu": "8", "nvidia.com/gpu": 1}},
                        },
                        {"name": "logger", "image": "fluent"},
                    ],
                }
            },
        },
    }
    job = make_job(
        {
            "gpus": 8,
            "gpuVendor": "nvidia",
            "job": user_job,
            "resources": {
                "requests": {"cpu": "100m"},
                "limits": {"memory": "100Mi", "nvidia.com/gpu": 2},
            },
        }
    )
    config = make_config(
        {"nodes": {"addTaintsToGpuNodes": True}, "scheduling": {"kubeSchedulerName": "other"}}
    )
    allocation = GpuAllocation(gpus=8, gpus_per_replica=8, replicas=1, vendor="nvidia")

    decision = plan_children(workload=job, allocation=allocation, config=config)

    system_labels = {
        "kaiwo.silogen.ai/user": "",
        "kaiwo.silogen.ai/name": "train",
        "kaiwo.silogen.ai/type": "job",
        "kaiwo.silogen.ai/run-id": "uid-1",
    }
    allocation_env = [
        {"name": "NUM_GPUS", "value": "8"},
        {"name": "NUM_REPLICAS", "value": "1"},
        {"name": "NUM_GPUS_PER_REPLICA", "value": "8"},
    ]
    assert list(decision.desired) == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train",
                "namespace": "team-a",
                "labels": {
                    **system_labels,
                    "kueue.x-k8s.io/queue-name": "kaiwo",
                    "app.kubernetes.io/managed-by": "kaiwo",
                    "kaiwo.silogen.ai/owner-uid": "uid-1",
                },
                "ownerReferences": [
                    {
                        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                        "kind": "KaiwoJob",
                        "name": "train",
                        "uid": "uid-1",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "backoffLimit": 3,
                "ttlSecondsAfterFinished": 123,
                "parallelism": 1,
                "suspend": True,
                "template": {
                    "metadata": {"labels": system_labels},
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "initContainers": [
                            {
                                "name": "init",
                                "image": "alpine",
                                "resources": {
                                    "requests": {"cpu": "100m"},
                                    "limits": {"memory": "100Mi"},
                                },
                            }
                        ],
                        "containers": [
                            {
                                "name": "main",
                                "image": "pytorch:2",
                                "args": ["--epochs", "1"],
                                "env": allocation_env,
                                "resources": {
                                    # The base 16Gi request yields to the 100Mi limit the
                                    # user gave (16Gi under a 100Mi limit is rejected).
                                    "requests": {
                                        "cpu": "100m",
                                        "memory": "100Mi",
                                        "nvidia.com/gpu": "8",
                                    },
                                    "limits": {
                                        "cpu": "8",
                                        "memory": "100Mi",
                                        "nvidia.com/gpu": "8",
                                    },
                                },
                            },
                            {
                                "name": "logger",
                                "image": "fluent",
                                "env": allocation_env,
                                "resources": {
                                    "requests": {"cpu": "100m", "memory": "100Mi"},
                                    "limits": {"cpu": "2", "memory": "100Mi"},
                                },
                            },
                        ],
                        "tolerations": [
                            {
                                "key": "kaiwo.silogen.ai/gpu",
                                "operator": "Exists",
                                "effect": "NoSchedule",
                            }
                        ],
                    },
                },
            },
        }
    ]
    assert decision.notes == (
        "GPU quantities in spec.resources (nvidia.com/gpu) are ignored; "
        "GPUs are set with spec.gpus, spec.gpusPerReplica and spec.gpuVendor",
    )


def test_generated_template_with_gpus_uses_per_gpu_cpu_and_memory_over_spec_resources(
    make_job,
):
    job = make_job({"gpus": 4, "resources": {"requests": {"cpu": "1", "ephemeral-storage": "5Gi"}}})
    allocation = GpuAllocation(gpus=4, gpus_per_replica=4, replicas=1, vendor="amd")

    (manifest,) = plan_children(workload=job, allocation=allocation, config=None).desired

    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {
            "cpu": "16",
            "memory": "128Gi",
            "ephemeral-storage": "5Gi",
            "amd.com/gpu": "4",
        },
        "limits": {"cpu": "16", "memory": "128Gi", "amd.com/gpu": "4"},
    }
    assert container["image"] == "ghcr.io/silogen/rocm-ray:6.4"
    assert "tolerations" not in manifest["spec"]["template"]["spec"]


def test_gpu_models_pin_gpu_pods_to_those_models(make_job):
    job = make_job({"gpus": 2, "gpuModels": ["MI300X", "MI250"]})
    allocation = GpuAllocation(gpus=2, gpus_per_replica=2, replicas=1, vendor="amd")

    (manifest,) = plan_children(workload=job, allocation=allocation, config=None).desired

    assert manifest["spec"]["template"]["spec"]["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kaiwo/gpu-model",
                                "operator": "In",
                                "values": ["MI300X", "MI250"],
                            }
                        ]
                    }
                ]
            }
        }
    }


def test_dangerous_leaves_out_the_security_context(make_job):
    (manifest,) = plan_children(
        workload=make_job({"dangerous": True}), allocation=NO_GPUS, config=None
    ).desired

    assert "securityContext" not in manifest["spec"]["template"]["spec"]


def test_the_same_inputs_give_byte_identical_plans(make_job):
    spec = {"gpus": 8, "gpuVendor": "nvidia", "env": [{"name": "A", "value": "1"}]}
    allocation = GpuAllocation(gpus=8, gpus_per_replica=8, replicas=1, vendor="nvidia")

    first = plan_children(workload=make_job(spec), allocation=allocation, config=None)
    second = plan_children(workload=make_job(spec), allocation=allocation, config=None)

    assert canonical_json(list(first.desired)) == canonical_json(list(second.desired))


def test_a_user_job_without_a_restart_policy_gets_never(make_job):
    # The API server refuses a Job whose pods would restart Always (what a pod template left
    # without restartPolicy means): the Job gets Kaiwo's own default, Never.
    user_job = {"spec": {"template": {"spec": {"containers": [{"name": "main"}]}}}}
    (manifest,) = plan_children(
        workload=make_job({"job": user_job}), allocation=NO_GPUS, config=None
    ).desired

    assert manifest["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_a_user_jobs_own_restart_policy_is_kept(make_job):
    user_job = {
        "spec": {
            "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "main"}]}}
        }
    }
    (manifest,) = plan_children(
        workload=make_job({"job": user_job}), allocation=NO_GPUS, config=None
    ).desired

    assert manifest["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_a_user_job_that_names_no_container_runs_kaiwos_default_template(make_job):
    """``job: {spec: {activeDeadlineSeconds: 4}}`` sets a Job parameter only: the image,
    entrypoint and resources go into Kaiwo's own template (decision 0136). Before, the Job had
    no container, and the API server refused it on every plan."""
    spec = {"image": "busybox:1", "entrypoint": "python train.py"}
    (default,) = plan_children(workload=make_job(spec), allocation=NO_GPUS, config=None).desired
    given = {**spec, "job": {"spec": {"activeDeadlineSeconds": 4, "backoffLimit": 2}}}

    (manifest,) = plan_children(workload=make_job(given), allocation=NO_GPUS, config=None).desired

    assert manifest["spec"] == {**default["spec"], "activeDeadlineSeconds": 4, "backoffLimit": 2}
    assert manifest["spec"]["template"]["spec"]["containers"][0]["name"] == "workload"


def test_a_user_template_without_containers_keeps_what_it_sets_over_the_default(make_job):
    spec = {"image": "busybox:1"}
    (default,) = plan_children(workload=make_job(spec), allocation=NO_GPUS, config=None).desired
    template = {
        "metadata": {"labels": {"tier": "batch"}},
        "spec": {"nodeSelector": {"pool": "a"}, "containers": [], "restartPolicy": "OnFailure"},
    }
    given = {**spec, "job": {"spec": {"template": template}}}

    (manifest,) = plan_children(workload=make_job(given), allocation=NO_GPUS, config=None).desired

    made, generated = manifest["spec"]["template"], default["spec"]["template"]
    assert made["spec"] == {
        **generated["spec"],
        "nodeSelector": {"pool": "a"},
        "restartPolicy": "OnFailure",
    }
    assert made["metadata"]["labels"] == {**generated["metadata"]["labels"], "tier": "batch"}


def test_kueues_min_parallelism_in_spec_job_is_carried_onto_the_job(make_job):
    """Kueue reads ``kueue.x-k8s.io/job-min-parallelism`` from the Job itself; given in
    ``spec.job.metadata.annotations`` it reaches the Job (decision 0153). Before, the embedded
    Job's metadata was dropped whole, so Kueue never admitted the Job partially, and a sweep
    larger than its queue waited for good. The rest of that metadata stays ignored."""
    job = make_job(
        {
            "image": "busybox:1",
            "job": {
                "metadata": {
                    "labels": {"ignored": "yes"},
                    "annotations": {
                        "kueue.x-k8s.io/job-min-parallelism": "2",
                        "other": "ignored",
                    },
                },
                "spec": {"parallelism": 4, "completions": 4},
            },
        }
    )
    decision = plan_children(workload=job, allocation=NO_GPUS, config=None)
    [made] = [c for c in decision.desired if c["kind"] == "Job"]
    assert made["metadata"]["annotations"] == {"kueue.x-k8s.io/job-min-parallelism": "2"}
    assert "ignored" not in made["metadata"]["labels"]
    assert made["spec"]["parallelism"] == 4


def test_kueues_completions_equal_parallelism_in_spec_job_is_carried_onto_the_job(make_job):
    """``kueue.x-k8s.io/job-completions-equal-parallelism`` is read by Kueue from the Job as
    well: an Indexed sweep admitted with fewer pods then runs as many indexes as pods
    (decision 0157). Before, it was dropped, and Kueue left ``completions`` as asked."""
    job = make_job(
        {
            "image": "busybox:1",
            "job": {
                "metadata": {
                    "annotations": {
                        "kueue.x-k8s.io/job-min-parallelism": "2",
                        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
                        "other": "ignored",
                    },
                },
                "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
            },
        }
    )
    decision = plan_children(workload=job, allocation=NO_GPUS, config=None)
    [made] = [c for c in decision.desired if c["kind"] == "Job"]
    assert made["metadata"]["annotations"] == {
        "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    assert (made["spec"]["parallelism"], made["spec"]["completions"]) == (4, 4)


def test_a_job_without_kueues_min_parallelism_has_no_annotations(make_job):
    job = make_job({"image": "busybox:1", "job": {"spec": {"parallelism": 4}}})
    decision = plan_children(workload=job, allocation=NO_GPUS, config=None)
    [made] = [c for c in decision.desired if c["kind"] == "Job"]
    assert "annotations" not in made["metadata"]


def test_gpu_models_name_the_flavors_of_the_queue_that_hold_them(make_job):
    # Kueue chooses the flavor by the labels its flavors declare only (decision 0237).
    job = make_job({"gpus": 2, "gpuModels": ["mi250x"]})
    allocation = GpuAllocation(gpus=2, gpus_per_replica=2, replicas=1, vendor="amd")
    flavors = ((("amd.com/gpu.product-name", "AMD_Instinct_MI250X"), ("kaiwo/worker", "true")),)

    (manifest,) = plan_children(
        workload=job, allocation=allocation, config=None, gpu_model_flavors=flavors
    ).desired

    assert manifest["spec"]["template"]["spec"]["affinity"]["nodeAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kaiwo/gpu-model", "operator": "In", "values": ["mi250x"]},
                        {
                            "key": "amd.com/gpu.product-name",
                            "operator": "In",
                            "values": ["AMD_Instinct_MI250X"],
                        },
                        {"key": "kaiwo/worker", "operator": "In", "values": ["true"]},
                    ]
                }
            ]
        }
    }
