"""The real API server's audit log counts write requests as the fake's ``write_requests`` does:
a repeated apply that changes nothing is still a request (and commits nothing)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter

import pytest
from kaiwo_kube import NotFound
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import NAMESPACE

from tests.real_cluster import RealCluster

pytestmark = pytest.mark.k8s


async def test_the_audit_log_counts_each_clients_write_requests(
    real_cluster: RealCluster,
) -> None:
    audit = real_cluster.audit_log
    if audit is None:
        pytest.skip("the cluster of KAIWO_TEST_KUBECONFIG has no audit log the tests can read")
    user = f"audit-probe-{uuid.uuid4().hex[:6]}"
    namespace = f"kaiwo-audit-{uuid.uuid4().hex[:6]}"
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": namespace},
        "data": {"a": "1"},
    }
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig) as admin,
        await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig_for(user)) as probe,
    ):
        await admin.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        try:
            mark = audit.mark()
            first = await probe.apply(desired, field_manager="kaiwo")
            again = await probe.apply(desired, field_manager="kaiwo")
            await probe.delete(NAMESPACE, namespace)

            def probes() -> Counter[tuple[str, str]]:
                return Counter(
                    {key: n for key, n in audit.writes(since=mark).items() if key[0] == user}
                )

            # The server writes a request's line just after answering it: up to 10 s.
            for _ in range(100):
                if sum(probes().values()) >= 3:
                    break
                await asyncio.sleep(0.1)
            assert probes() == Counter({(user, "patch"): 2, (user, "delete"): 1})
            assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        finally:
            with contextlib.suppress(NotFound):
                await admin.delete(NAMESPACE, namespace)
