"""On the real API server: the executor carries out an autoscaler's scale of a Model only
while the Model is the one the decision was made from (decision 0172), and writes an unset
``spec.replicas`` down only while it is unset (decision 0223).

The race: the executor reads the Model (its replicas are those the decision started from),
the user sets ``autoscalingDisabled: true`` without touching ``replicas``, then the executor's
scale patch arrives. The test plays the user inside the executor's read, so the edit lands in
exactly that window.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Final

import pytest
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.plans import ObjectRef, Plan, ScaleIntent
from kaiwo_executor.apply_plan import Execution, PlanExecutor
from kaiwo_executor.execution_memo import ExecutionMemo
from kaiwo_kube import Retryable, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.kv import MemoryKeyValue

from tests.kube_backends import scratch_namespace
from tests.managed_fields import field_managers_of
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s]

NOW: Final = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class EditAfterFirstRead:
    """The executor's port, with someone's edit of the Model right after its first read."""

    def __init__(self, inner: KubernetesAsyncioAdapter, edit: dict[str, Any], *, status: bool):
        self.inner = inner
        self.edit = edit
        self.status = status
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        found = await self.inner.get(*args, **kwargs)
        self.reads += 1
        if self.reads == 1:
            meta = found["metadata"]
            if self.status:
                await self.inner.patch_status(
                    resources.KUBEAI_MODEL,
                    meta["name"],
                    self.edit,
                    namespace=meta["namespace"],
                    field_manager="someone",
                    method="merge",
                )
            else:
                await self.inner.merge_patch(
                    resources.KUBEAI_MODEL, meta["name"], self.edit, namespace=meta["namespace"]
                )
        return found


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with contextlib.AsyncExitStack() as stack:
        adapter = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
        stack.push_async_callback(adapter.close)
        yield adapter


async def a_model_at_two(
    kube: KubernetesAsyncioAdapter, stack: contextlib.AsyncExitStack
) -> dict[str, Any]:
    namespace = await scratch_namespace(kube, stack, prefix="kaiwo-scale")
    return await kube.create(
        {
            "apiVersion": "kubeai.org/v1",
            "kind": "Model",
            "metadata": {"name": "llm", "namespace": namespace},
            "spec": {
                "url": "hf://o/m",
                "engine": "VLLM",
                "features": ["TextGeneration"],
                "replicas": 2,
                "minReplicas": 1,
                "maxReplicas": 4,
            },
        }
    )


async def carry_out(kube: Any, model: dict[str, Any], *, replicas: int) -> Execution:
    """The plan the planner makes of the autoscaler's decision 2 -> ``replicas``."""
    meta = model["metadata"]
    owner = ObjectRef(
        api_version="kubeai.org/v1",
        kind="Model",
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta["uid"],
    )
    plan = Plan(
        owner=owner,
        observed_generation=meta["generation"],
        scale=ScaleIntent(target=owner, replicas=replicas, from_replicas=2),
    )
    executor = PlanExecutor(kube, ExecutionMemo(MemoryKeyValue()), clock=lambda: NOW)
    return await executor.execute(PlanDecidedV1.of(plan), plan_id=uuid.uuid4().hex, sequence=1)


def scale_actions(execution: Execution) -> list[tuple[str, str | None, int]]:
    return [(a.outcome, a.reason, a.attempts) for a in execution.actions if a.operation == "scale"]


async def test_autoscaling_disabled_just_before_the_scale_keeps_the_users_replicas(
    kube: KubernetesAsyncioAdapter,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        model = await a_model_at_two(kube, stack)
        assert model["metadata"]["generation"] == 1
        user = EditAfterFirstRead(kube, {"spec": {"autoscalingDisabled": True}}, status=False)

        execution = await carry_out(user, model, replicas=4)

        found = await kube.get(
            resources.KUBEAI_MODEL, "llm", namespace=model["metadata"]["namespace"]
        )
        assert found["spec"]["autoscalingDisabled"] is True
        assert found["spec"]["replicas"] == 2
        assert scale_actions(execution) == [
            (
                "unchanged",
                "the spec changed since the decision (generation 1); left to the next decision",
                1,
            )
        ]


async def test_a_status_write_just_before_the_scale_does_not_stop_it(
    kube: KubernetesAsyncioAdapter,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        model = await a_model_at_two(kube, stack)
        someone = EditAfterFirstRead(kube, {"status": {"replicas": {"all": 2}}}, status=True)

        execution = await carry_out(someone, model, replicas=4)

        found = await kube.get(
            resources.KUBEAI_MODEL, "llm", namespace=model["metadata"]["namespace"]
        )
        assert found["spec"]["replicas"] == 4
        assert scale_actions(execution) == [("applied", "replicas 2 -> 4", 2)]


# ------------------------------------------------ an unset spec.replicas written down (0223)


async def a_model_without_replicas(
    kube: KubernetesAsyncioAdapter, stack: contextlib.AsyncExitStack
) -> dict[str, Any]:
    namespace = await scratch_namespace(kube, stack, prefix="kaiwo-scale")
    return await kube.create(
        {
            "apiVersion": "kubeai.org/v1",
            "kind": "Model",
            "metadata": {"name": "llm", "namespace": namespace},
            "spec": {
                "url": "hf://o/m",
                "engine": "VLLM",
                "features": ["TextGeneration"],
                "minReplicas": 0,
                "maxReplicas": 3,
            },
        },
        field_manager="kubectl-create",
    )


async def write_down(kube: Any, model: dict[str, Any]) -> Execution:
    """The plan the planner makes of a Model with ``spec.replicas`` unset and ``minReplicas``
    0: the bounds' write-back, 0 from 0."""
    meta = model["metadata"]
    owner = ObjectRef(
        api_version="kubeai.org/v1",
        kind="Model",
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta["uid"],
    )
    plan = Plan(
        owner=owner,
        observed_generation=meta["generation"],
        scale=ScaleIntent(target=owner, replicas=0, from_replicas=0),
    )
    executor = PlanExecutor(kube, ExecutionMemo(MemoryKeyValue()), clock=lambda: NOW)
    return await executor.execute(PlanDecidedV1.of(plan), plan_id=uuid.uuid4().hex, sequence=1)


async def test_an_unset_replicas_written_down_opens_the_scale_subresource_and_owns_nothing(
    kube: KubernetesAsyncioAdapter,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        model = await a_model_without_replicas(kube, stack)
        namespace = model["metadata"]["namespace"]
        # What an HPA or `kubectl get --subresource scale` met (decision 0027).
        with pytest.raises(Retryable) as unreadable:
            await kube.get_scale(resources.KUBEAI_MODEL, "llm", namespace=namespace)
        assert unreadable.value.code == 500
        assert 'the spec replicas field ".spec.replicas" does not exist' in str(unreadable.value)

        execution = await write_down(kube, model)

        assert scale_actions(execution) == [("applied", "replicas unset -> 0", 1)]
        scale = await kube.get_scale(resources.KUBEAI_MODEL, "llm", namespace=namespace)
        # autoscaling/v1 omits a zero: {} is "0 replicas".
        assert (scale["spec"], scale["status"]) == ({}, {"replicas": 0})
        found = await kube.get(resources.KUBEAI_MODEL, "llm", namespace=namespace)
        assert found["spec"]["replicas"] == 0
        # A 0 written through the Scale (which omits it) gives no manager the field: the
        # user's later server-side apply of replicas, unforced, is no conflict.
        assert field_managers_of(found, "spec", "replicas") == set()
        applied = await kube.apply(
            {
                "apiVersion": "kubeai.org/v1",
                "kind": "Model",
                "metadata": {"name": "llm", "namespace": namespace},
                "spec": {
                    "url": "hf://o/m",
                    "engine": "VLLM",
                    "features": ["TextGeneration"],
                    "replicas": 2,
                },
            },
            field_manager="kubectl",
            force=False,
        )
        assert applied["spec"]["replicas"] == 2
        assert field_managers_of(applied, "spec", "replicas") == {"kubectl"}

        # A write-down planned before the user's apply never undoes it.
        late = await write_down(kube, model)

        assert scale_actions(late) == [
            ("unchanged", "set by someone else since the plan; left as set", 1)
        ]
        found = await kube.get(resources.KUBEAI_MODEL, "llm", namespace=namespace)
        assert found["spec"]["replicas"] == 2


async def test_replicas_set_just_before_the_write_down_stand(
    kube: KubernetesAsyncioAdapter,
) -> None:
    """The user scales the Model between the executor's read (no replicas) and its patch:
    the patch's resourceVersion test refuses the write-down, and the user's 3 stands."""
    async with contextlib.AsyncExitStack() as stack:
        model = await a_model_without_replicas(kube, stack)
        user = EditAfterFirstRead(kube, {"spec": {"replicas": 3}}, status=False)

        execution = await write_down(user, model)

        found = await kube.get(
            resources.KUBEAI_MODEL, "llm", namespace=model["metadata"]["namespace"]
        )
        assert found["spec"]["replicas"] == 3
        assert scale_actions(execution) == [
            ("unchanged", "set by someone else since the plan; left as set", 1)
        ]
