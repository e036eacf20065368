"""An apply the API server answers "404 page not found" (it does not serve the kind: Kueue,
KubeRay or AppWrapper not installed) is refused naming what is missing, not quoting the 404;
a 404 naming a missing namespace keeps the API server's words (decision 0265). Against the
fake API server, which serves neither ray.io nor kueue.x-k8s.io and answers as the real one."""

from __future__ import annotations

from typing import Any

from kaiwo_executor.apply_refusals import not_served_message


def ray_job(harness: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": harness.child_metadata("train"),
        "spec": {"entrypoint": "python train.py"},
    }


async def test_an_apply_of_a_kind_not_served_names_the_component_to_install(
    harness: Any,
) -> None:
    await harness.run(
        harness.plan([ray_job(harness)], status={"status": "PENDING"}), plan_id="plan-1"
    )

    live = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")
    [condition] = live["status"]["conditions"]
    assert condition["type"] == "ApplyRefused"
    assert condition["reason"] == "NotServed"
    assert condition["message"] == (
        "the API server refused: RayJob team-a/train: the API server does not serve "
        "ray.io/v1 RayJob: install KubeRay (docs/operations.md, What the cluster needs)"
    )
    [event] = harness.events(reason="ApplyFailed")
    assert event["message"] == (
        "apply RayJob/team-a/train failed: the API server does not serve ray.io/v1 RayJob: "
        "install KubeRay (docs/operations.md, What the cluster needs)"
    )


async def test_a_missing_namespace_keeps_the_api_servers_words(harness: Any) -> None:
    elsewhere = harness.config_map()
    elsewhere["metadata"]["namespace"] = "nowhere"

    await harness.run(harness.plan([elsewhere], status={"status": "PENDING"}), plan_id="plan-1")

    live = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")
    [condition] = live["status"]["conditions"]
    assert condition["reason"] == "NotFound"
    assert condition["message"] == (
        'the API server refused: ConfigMap nowhere/train-entrypoint: namespaces "nowhere" not found'
    )


def test_the_component_is_named_by_the_api_group() -> None:
    assert not_served_message("kueue.x-k8s.io/v1beta1", "ClusterQueue") == (
        "the API server does not serve kueue.x-k8s.io/v1beta1 ClusterQueue: install Kueue "
        "(docs/operations.md, What the cluster needs)"
    )
    assert not_served_message("workload.codeflare.dev/v1beta2", "AppWrapper") == (
        "the API server does not serve workload.codeflare.dev/v1beta2 AppWrapper: install "
        "AppWrapper (docs/operations.md, What the cluster needs)"
    )
    assert not_served_message("example.com/v1", "Widget") == (
        "the API server does not serve example.com/v1 Widget: install the component that "
        "defines it (docs/operations.md, What the cluster needs)"
    )
