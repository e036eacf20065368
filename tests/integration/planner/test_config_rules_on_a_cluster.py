"""KaiwoConfig and KaiwoQueueConfig values that the API server or Kueue would refuse later
are refused by the CRD at once, naming the field: a scheduler name no pod accepts (every
child's apply failed), a WorkloadPriorityClass value beyond Kueue's int32 (the class was
refused). The objects here are not named ``kaiwo``, so no operator reads them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kaiwo_kube import Invalid, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.real_cluster import RealCluster

pytestmark = pytest.mark.k8s

NAME = "rules-on-a-cluster"


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig) as kube:
        yield kube
        for resource in (resources.KAIWO_CONFIG, resources.KAIWO_QUEUE_CONFIG):
            if any(o["metadata"]["name"] == NAME for o in (await kube.list(resource)).items):
                await kube.delete(resource, NAME)


def kaiwo_config(scheduler_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": NAME},
        "spec": {"scheduling": {"kubeSchedulerName": scheduler_name}},
    }


def queue_config(value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": NAME},
        "spec": {"workloadPriorityClasses": [{"metadata": {"name": "p"}, "value": value}]},
    }


async def test_a_scheduler_name_no_pod_accepts_is_refused(kube: KubernetesAsyncioAdapter) -> None:
    with pytest.raises(Invalid) as raised:
        await kube.create(kaiwo_config("Kaiwo_Scheduler"))

    assert [cause["field"] for cause in raised.value.causes] == [
        "spec.scheduling.kubeSchedulerName"
    ]


@pytest.mark.parametrize("scheduler_name", ["", "gpu.scheduler-2"])
async def test_an_empty_or_dns_scheduler_name_is_accepted(
    kube: KubernetesAsyncioAdapter, scheduler_name: str
) -> None:
    created = await kube.create(kaiwo_config(scheduler_name))

    assert created["spec"]["scheduling"]["kubeSchedulerName"] == scheduler_name


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
async def test_a_priority_value_beyond_int32_is_refused(
    kube: KubernetesAsyncioAdapter, value: int
) -> None:
    with pytest.raises(Invalid) as raised:
        await kube.create(queue_config(value))

    assert [cause["field"] for cause in raised.value.causes] == [
        "spec.workloadPriorityClasses[0].value"
    ]


async def test_the_largest_int32_priority_value_is_accepted(
    kube: KubernetesAsyncioAdapter,
) -> None:
    created = await kube.create(queue_config(2**31 - 1))

    assert created["spec"]["workloadPriorityClasses"][0]["value"] == 2**31 - 1
