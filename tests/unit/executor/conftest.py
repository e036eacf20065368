"""Fixtures for the executor tests: the fake API server with the real adapter, a memory KV,
a KaiwoJob owner, manifests of its children, and a port double that fails on request."""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pytest
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.plan_sources import source_of
from kaiwo_contracts.plans import (
    EventIntent,
    ObjectRef,
    Plan,
    PlanSource,
    PruneRule,
    sort_objects,
)
from kaiwo_executor.api_retries import RetryPolicy
from kaiwo_executor.apply_plan import Execution, PlanExecutor
from kaiwo_executor.execution_memo import ExecutionMemo
from kaiwo_executor.metrics import ExecutorMetrics
from kaiwo_kube import KubeError, KubernetesPort
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer, ResourceKind
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector
from kaiwo_runtime.kv import MemoryKeyValue

NAMESPACE = "team-a"
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KAIWO_JOB = ResourceKind(
    group="kaiwo.silogen.ai",
    version="v1alpha1",
    plural="kaiwojobs",
    kind="KaiwoJob",
    namespaced=True,
)
KAIWO_QUEUE_CONFIG = ResourceKind(
    group="kaiwo.silogen.ai",
    version="v1alpha1",
    plural="kaiwoqueueconfigs",
    kind="KaiwoQueueConfig",
    namespaced=False,
)
INVENTORY_LABEL = "kaiwo.silogen.ai/owner-uid"
WORKLOAD_PRUNE = (
    PruneRule(api_version="batch/v1", kind="Job"),
    PruneRule(api_version="v1", kind="ConfigMap"),
    PruneRule(api_version="v1", kind="PersistentVolumeClaim"),
)


class FlakyKube:
    """Wraps a port; ``fail("apply", error, ...)`` makes the next calls of that method raise."""

    def __init__(self, inner: KubernetesPort) -> None:
        self.inner = inner
        self.failures: dict[str, list[KubeError]] = defaultdict(list)
        self.calls: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        """``get`` calls by the kind read."""

    def fail(self, method: str, *errors: KubeError) -> None:
        self.failures[method].extend(errors)

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name == "get":
                self.reads[args[0].kind] += 1
            if self.failures[name]:
                raise self.failures[name].pop(0)
            return await target(*args, **kwargs)

        return call


@dataclass
class Harness:
    """The fake cluster, the adapter on it, the KV, and the owner every plan is for."""

    fake: FakeKubeServer
    kube: KubernetesAsyncioAdapter
    kv: MemoryKeyValue
    owner: ObjectRef
    namespace: str = NAMESPACE
    inventory_label: str = INVENTORY_LABEL
    sleeps: list[float] = field(default_factory=list)
    metrics: ExecutorMetrics = field(default_factory=ExecutorMetrics)

    # ------------------------------------------------------------------ the executor

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def executor(
        self,
        *,
        kube: Any | None = None,
        kv: MemoryKeyValue | None = None,
        attempts: int = 4,
        clock: Callable[[], datetime] = lambda: NOW,
    ) -> PlanExecutor:
        return PlanExecutor(
            kube or self.kube,
            ExecutionMemo(kv or self.kv),
            clock=clock,
            retry=RetryPolicy(attempts=attempts, initial_delay=0.1, max_delay=1.0),
            metrics=self.metrics,
            sleep=self._sleep,
            jitter=lambda: 0.5,
        )

    async def run(
        self,
        plan: Plan,
        *,
        plan_id: str,
        absent: tuple[ObjectRef, ...] = (),
        drifted: tuple[ObjectRef, ...] = (),
        executor: PlanExecutor | None = None,
        sequence: int = 0,
        planned_at: datetime | None = None,
        owner_created_at: datetime | Literal["admitted"] | None = "admitted",
    ) -> Execution:
        """Execute, and remember the plan as the service does once its result is out; with
        the owner's creationTimestamp as admission reads it (``owner_created_at``, by default
        the fake's; the executors here start their memo at ``NOW``, before it)."""
        executor = executor or self.executor()
        decision = PlanDecidedV1.of(plan, absent=absent, drifted=drifted, planned_at=planned_at)
        if owner_created_at == "admitted":
            owner_created_at = self.owner_created_at()
        execution = await executor.execute(
            decision, plan_id=plan_id, sequence=sequence, owner_created_at=owner_created_at
        )
        if not execution.must_retry:
            await executor.remember(execution)
        return execution

    def owner_created_at(self) -> datetime | None:
        """The owner's creationTimestamp in the fake (None: no such owner)."""
        owner = self.owner
        stored = self.find(owner.api_version, owner.kind, owner.name, namespace=owner.namespace)
        if stored is None:
            return None
        return datetime.fromisoformat(stored["metadata"]["creationTimestamp"])

    # ------------------------------------------------------------------ plans

    def child_metadata(self, name: str, *, owner_uid: str | None = None) -> dict[str, Any]:
        uid = owner_uid or self.owner.uid
        return {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {INVENTORY_LABEL: uid},
            "ownerReferences": [
                {
                    "apiVersion": self.owner.api_version,
                    "kind": self.owner.kind,
                    "name": self.owner.name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }

    def job(self, *, image: str = "busybox:1.36") -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.child_metadata("train"),
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": image}],
                    }
                }
            },
        }

    def pvc(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": self.child_metadata("train-data"),
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "resources": {"requests": {"storage": "10Gi"}},
            },
        }

    def config_map(self, *, entrypoint: str = "python train.py") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": self.child_metadata("train-entrypoint"),
            "data": {"entrypoint.sh": entrypoint},
        }

    def plan(
        self,
        desired: list[dict[str, Any]],
        *,
        status: dict[str, Any] | None = None,
        events: tuple[EventIntent, ...] = (),
        prune: tuple[PruneRule, ...] = WORKLOAD_PRUNE,
        delete_owner: bool = False,
    ) -> Plan:
        assert self.owner.uid is not None
        return Plan(
            owner=self.owner,
            desired=sort_objects(desired),
            status=status,
            events=events,
            prune=prune,
            prune_selector={INVENTORY_LABEL: self.owner.uid},
            delete_owner=delete_owner,
            sources=(self.owner_source(),),
        )

    def owner_source(self) -> PlanSource:
        """The owner as the fake holds it now, as a plan names it (made from it)."""
        stored = self.find(self.owner.api_version, self.owner.kind, self.owner.name)
        if stored is None:  # a plan for an owner that does not exist: a forged one
            return PlanSource(ref=self.owner, digest="0" * 64)
        return source_of(stored)

    # ------------------------------------------------------------------ the cluster

    def find(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = NAMESPACE
    ) -> dict[str, Any] | None:
        return self.fake.store.find(self.served(api_version, kind), namespace=namespace, name=name)

    def served(self, api_version: str, kind: str) -> ResourceKind:
        found = self.fake.store.kinds.by_kind(api_version=api_version, kind=kind)
        assert found is not None
        return found

    def writes(self) -> Counter[tuple[str, str, str, str]]:
        return Counter(self.fake.store.write_requests)

    def events(self, *, reason: str | None = None) -> list[dict[str, Any]]:
        items, _ = self.fake.store.list_objects(
            self.served("v1", "Event"),
            namespace=None,
            labels=LabelSelector(),
            fields=FieldSelector(),
        )
        return [e for e in items if reason is None or e.get("reason") == reason]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": NAMESPACE},
        "spec": {"image": "busybox:1.36"},
    }
    kinds = (KAIWO_JOB, KAIWO_QUEUE_CONFIG)
    async for found in owner_harness(tmp_path, kinds=kinds, owner=job):
        yield found


@pytest.fixture
def flaky(harness: Harness) -> FlakyKube:
    return FlakyKube(harness.kube)


MODEL_NAMESPACE = "ai"


async def owner_harness(
    tmp_path: Path, *, kinds: tuple[ResourceKind, ...], owner: dict[str, Any]
) -> AsyncIterator[Harness]:
    """A fake API server serving ``kinds`` and holding ``owner`` (of the first kind), in its
    namespace: the owner of the plans."""
    namespace = owner["metadata"]["namespace"]
    async with contextlib.AsyncExitStack() as stack:
        fake = await stack.enter_async_context(
            FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig", kinds=kinds)
        )
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(fake.kubeconfig_path)
        stack.push_async_callback(kube.close)
        await kube.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        stored = fake.store.put(kinds[0], owner)
        ref = ObjectRef(
            api_version=owner["apiVersion"],
            kind=owner["kind"],
            name=owner["metadata"]["name"],
            namespace=namespace,
            uid=stored["metadata"]["uid"],
        )
        yield Harness(fake=fake, kube=kube, kv=MemoryKeyValue(), owner=ref, namespace=namespace)


def model_owner_harness(
    tmp_path: Path, *, kind: ResourceKind, metadata: dict[str, Any], spec: dict[str, Any]
) -> AsyncIterator[Harness]:
    """:func:`owner_harness` for KubeAI's Model ``llm`` in namespace ``ai``, with
    ``metadata`` and ``spec`` added."""
    model = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "llm", "namespace": MODEL_NAMESPACE, **metadata},
        "spec": {"url": "hf://o/m", "engine": "VLLM", **spec},
    }
    return owner_harness(tmp_path, kinds=(kind,), owner=model)
