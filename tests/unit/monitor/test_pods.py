"""Which workload a pod belongs to and how many GPUs it holds."""

from __future__ import annotations

from typing import Any

from kaiwo_monitor.domain.pods import MonitoredPod, monitored_pod, workload_ref

UID = "6f1c2d3e-0000-4000-8000-000000000001"


def pod(
    *,
    labels: dict[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": "team-a",
            "labels": labels
            if labels is not None
            else {
                "kaiwo.silogen.ai/run-id": UID,
                "kaiwo.silogen.ai/type": "job",
                "kaiwo.silogen.ai/name": "train",
            },
        },
        "spec": {"containers": containers or []},
        "status": {"phase": phase},
    }


def gpus(requests: dict[str, Any], limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"name": "main", "image": "x", "resources": resources}


def test_a_kaiwojob_pod_with_two_amd_gpus() -> None:
    found = monitored_pod(
        pod(containers=[gpus({"amd.com/gpu": "2", "cpu": "4"})]), gpu_resource_key="amd.com/gpu"
    )
    assert found == MonitoredPod(
        namespace="team-a",
        name="train-0",
        workload=workload_ref(kind="KaiwoJob", name="train", namespace="team-a", uid=UID),
        requested_gpus=2,
        vendor="amd",
        running=True,
    )


def test_a_service_pod_on_nvidia_counts_limits_and_every_container() -> None:
    labels = {
        "kaiwo.silogen.ai/run-id": UID,
        "kaiwo.silogen.ai/type": "service",
        "kaiwo.silogen.ai/name": "chat",
    }
    found = monitored_pod(
        pod(
            labels=labels,
            containers=[
                gpus({"nvidia.com/gpu": 1}, limits={"nvidia.com/gpu": 2}),
                gpus({}, limits={"nvidia.com/gpu": "1"}),
            ],
            phase="Pending",
        ),
        gpu_resource_key="amd.com/gpu",
    )
    assert found is not None
    assert found.workload.kind == "KaiwoService"
    assert found.workload.name == "chat"
    assert (found.requested_gpus, found.vendor, found.running) == (3, "nvidia", False)


def test_the_configured_gpu_key_counts_even_without_the_gpu_suffix() -> None:
    found = monitored_pod(
        pod(containers=[gpus({"example.com/accelerator": "4", "cpu": "1"})]),
        gpu_resource_key="example.com/accelerator",
    )
    assert found is not None
    assert found.requested_gpus == 4


def test_odd_quantities_count_as_no_gpu() -> None:
    found = monitored_pod(
        pod(containers=[gpus({"amd.com/gpu": "500m"}), gpus({"amd.com/gpu": True})]),
        gpu_resource_key="amd.com/gpu",
    )
    assert found is not None
    assert found.requested_gpus == 0


def test_pods_of_other_controllers_and_downloaders_are_not_monitored() -> None:
    downloader = {
        "kaiwo.silogen.ai/run-id": UID,
        "kaiwo.silogen.ai/type": "downloader",
        "kaiwo.silogen.ai/name": "train",
    }
    no_name = {"kaiwo.silogen.ai/run-id": UID, "kaiwo.silogen.ai/type": "job"}
    for labels in ({}, downloader, no_name):
        assert monitored_pod(pod(labels=labels), gpu_resource_key="amd.com/gpu") is None


def test_the_object_ref_names_the_workload() -> None:
    ref = workload_ref(kind="KaiwoJob", name="train", namespace="team-a", uid=UID)
    assert ref.model_dump() == {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "name": "train",
        "namespace": "team-a",
        "uid": UID,
    }
