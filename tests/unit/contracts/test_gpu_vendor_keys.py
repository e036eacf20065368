"""Another vendor's GPU key in a pod template the user gives, in a workload that asks Kaiwo for
GPUs (decision 0161): the pods would ask for both kinds and wait for good, so the spec is
refused, naming each field, on every path where a user gives a template: a KaiwoJob's
``spec.job`` and ``spec.rayJob`` cluster, a KaiwoService's ``spec.deployment`` and
``spec.rayService`` cluster. Expected values written by hand."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJobSpec
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoservice import KaiwoServiceSpec
from pydantic import ValidationError

NVIDIA = "nvidia.com/gpu"
AMD = "amd.com/gpu"


def template(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"spec": spec}


def container(name: str = "main", **sections: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "image": "img", "resources": sections}


def cluster(head: dict[str, Any], *workers: dict[str, Any]) -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": head},
        "workerGroupSpecs": [
            {"groupName": f"g{i}", "template": worker} for i, worker in enumerate(workers)
        ],
    }


def refusal(model: Any, spec: dict[str, Any]) -> tuple[tuple[Any, ...], str, str]:
    with pytest.raises(ValidationError) as raised:
        model.model_validate(spec)
    [error] = raised.value.errors()
    return error["loc"], error["type"], error["msg"]


def tail(owner: str, vendor: str, asked: str, own: str, other: str, other_vendor: str) -> str:
    other_name = {"amd": "AMD", "nvidia": "NVIDIA"}[other_vendor]
    return (
        f" must not be given: the {owner} asks Kaiwo for {vendor} GPUs ({asked}), which Kaiwo "
        f"gives its pods under {own}, and a pod that also asks for {other} fits no node and no "
        f"flavor of a queue, so it would wait for good; set gpuVendor: {other_vendor} to run on "
        f"{other_name} GPUs (Kaiwo then sets {other} itself), or leave {other} out of the "
        "template"
    )


AMD_JOB_TAIL = tail(
    "KaiwoJob", "AMD", "gpus 1, gpuVendor amd, the default when left out", AMD, NVIDIA, "nvidia"
)


def test_a_jobs_template_asking_for_nvidia_in_an_amd_job_is_refused() -> None:
    """The representative case: ``gpus: 1``, vendor left out (amd), ``spec.job`` whose
    container limits ``nvidia.com/gpu: 1``."""
    job = {"spec": {"template": template(container(limits={NVIDIA: 1}))}}

    assert refusal(KaiwoJobSpec, {"gpus": 1, "job": job}) == (
        ("job",),
        "other_vendor_gpu_key",
        'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"] (1)' + AMD_JOB_TAIL,
    )


def test_every_quantity_of_every_container_is_named() -> None:
    """Limits and requests, a sidecar and an init container: each would make the pod ask for
    the other kind (an init container's request counts for the pod too)."""
    job = {
        "spec": {
            "template": template(
                container(limits={NVIDIA: "1"}, requests={NVIDIA: "1"}),
                container("sidecar", limits={NVIDIA: 0}),
                init=(container("setup", requests={NVIDIA: 2}),),
            )
        }
    }

    _, _, message = refusal(KaiwoJobSpec, {"gpus": 1, "gpuVendor": "AMD", "job": job})

    assert message == (
        'spec.template.spec.initContainers[0].resources.requests["nvidia.com/gpu"] (2), '
        'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"] (1), '
        'spec.template.spec.containers[0].resources.requests["nvidia.com/gpu"] (1), '
        'spec.template.spec.containers[1].resources.limits["nvidia.com/gpu"] (0)'
        + tail("KaiwoJob", "AMD", "gpus 1, gpuVendor AMD", AMD, NVIDIA, "nvidia")
    )


def test_a_ray_jobs_head_and_worker_groups_are_each_judged() -> None:
    ray_job = {
        "spec": {
            "rayClusterSpec": cluster(
                template(container("ray-head", limits={NVIDIA: 1})),
                template(container("ray-worker", limits={AMD: 2})),
                template(container("ray-worker", requests={NVIDIA: 2})),
            )
        }
    }

    assert refusal(
        KaiwoJobSpec, {"gpus": 4, "replicas": 2, "gpusPerReplica": 2, "rayJob": ray_job}
    ) == (
        ("rayJob",),
        "other_vendor_gpu_key",
        'spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resources.limits["'
        'nvidia.com/gpu"] (1), spec.rayClusterSpec.workerGroupSpecs[1].template.spec.'
        'containers[0].resources.requests["nvidia.com/gpu"] (2)'
        + tail(
            "KaiwoJob",
            "AMD",
            "gpus 4, gpusPerReplica 2, gpuVendor amd, the default when left out",
            AMD,
            NVIDIA,
            "nvidia",
        ),
    )


def test_a_deployments_template_asking_for_amd_in_an_nvidia_service_is_refused() -> None:
    deployment = {"spec": {"template": template(container(requests={AMD: "2"}))}}

    assert refusal(
        KaiwoServiceSpec, {"gpus": 2, "gpuVendor": "nvidia", "deployment": deployment}
    ) == (
        ("deployment",),
        "other_vendor_gpu_key",
        'spec.template.spec.containers[0].resources.requests["amd.com/gpu"] (2)'
        + tail("KaiwoService", "NVIDIA", "gpus 2, gpuVendor nvidia", NVIDIA, AMD, "amd"),
    )


def test_a_ray_services_worker_group_is_judged() -> None:
    ray_service = {
        "spec": {
            "rayClusterConfig": cluster(
                template(container("ray-head")),
                template(container("ray-worker", limits={NVIDIA: 8})),
            )
        }
    }

    assert refusal(KaiwoServiceSpec, {"gpus": 8, "rayService": ray_service}) == (
        ("rayService",),
        "other_vendor_gpu_key",
        "spec.rayClusterConfig.workerGroupSpecs[0].template.spec.containers[0].resources."
        'limits["nvidia.com/gpu"] (8)'
        + tail(
            "KaiwoService",
            "AMD",
            "gpus 8, gpuVendor amd, the default when left out",
            AMD,
            NVIDIA,
            "nvidia",
        ),
    )


NVIDIA_JOB = {"spec": {"template": template(container(limits={NVIDIA: 1}))}}
NVIDIA_CLUSTER = {
    "spec": {
        "rayClusterSpec": cluster(template(), template(container(limits={NVIDIA: 1}))),
        "rayClusterConfig": cluster(template(), template(container(limits={NVIDIA: 1}))),
    }
}


@pytest.mark.parametrize(
    ("model", "spec"),
    [
        # No GPUs asked of Kaiwo: the template's GPU keys are the user's, kept as written.
        (KaiwoJobSpec, {"job": NVIDIA_JOB}),
        (KaiwoJobSpec, {"gpus": 0, "job": NVIDIA_JOB}),
        (KaiwoJobSpec, {"rayJob": NVIDIA_CLUSTER}),
        (KaiwoServiceSpec, {"deployment": NVIDIA_JOB}),
        (KaiwoServiceSpec, {"rayService": NVIDIA_CLUSTER}),
        # The workload's own vendor: 0154's replaced-and-told quantities, not this rule.
        (KaiwoJobSpec, {"gpus": 1, "gpuVendor": "nvidia", "job": NVIDIA_JOB}),
        (KaiwoJobSpec, {"gpus": 1, "gpuVendor": "NVIDIA", "rayJob": NVIDIA_CLUSTER}),
        (KaiwoServiceSpec, {"gpus": 1, "gpuVendor": "nvidia", "rayService": NVIDIA_CLUSTER}),
        # A vendor whose key is the KaiwoConfig's: not known offline.
        (KaiwoJobSpec, {"gpus": 1, "gpuVendor": "intel", "job": NVIDIA_JOB}),
        # A template that is not used: told as ignored (decision 0119), not judged.
        (KaiwoJobSpec, {"gpus": 1, "ray": True, "job": NVIDIA_JOB}),
        (KaiwoServiceSpec, {"gpus": 1, "ray": True, "deployment": NVIDIA_JOB}),
        # No template, no containers, no resources.
        (KaiwoJobSpec, {"gpus": 1, "job": {"spec": {"backoffLimit": 2}}}),
        (KaiwoJobSpec, {"gpus": 1, "job": {"spec": {"template": template(container())}}}),
        (KaiwoJobSpec, {"gpus": 1, "rayJob": {"spec": {"entrypoint": "python x.py"}}}),
    ],
)
def test_what_is_not_judged_is_accepted(model: Any, spec: dict[str, Any]) -> None:
    model.model_validate(spec)
