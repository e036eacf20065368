"""Never adopt, with the whole operator on the session's real API server (issue 23): a KaiwoJob
``payroll`` whose download ConfigMap name someone else's ConfigMap ``payroll-download`` has, a
KaiwoJob ``ds`` whose data volume name someone else's PVC ``ds-data`` has, and a KaiwoJob
``report`` whose Job name someone else's Job ``report`` has. Each foreign object stays exactly
as it was, each KaiwoJob says why it does not start (condition and Warning Event
``NameConflict``), and deleting the KaiwoJobs, with the real garbage collector running, leaves
every foreign object where it was. Before, the executor's server-side apply took each one
over (its owner reference added) and the garbage collector deleted it with the KaiwoJob.

Once the name is free, the planner's resync lets the KaiwoJob go on and the condition goes.
The executor alone against the fake API server: tests/unit/executor/test_never_adopt.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import NotFound, resources

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.asyncio(loop_scope="module"),
]

RESYNC_SECONDS: Final = 3
OPERATOR_MANAGERS: Final = frozenset({"kaiwo", "kaiwo-create", "kaiwo-status"})
GC_SECONDS: Final = 60.0


def config_map(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"salaries.csv": "alice,100\nbob,120\n"},
    }


def volume_claim(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def job(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "suspend": True,  # nobody's kubelet runs it here; it only has to be there
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "report", "image": "reports:3"}],
                }
            },
        },
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pipeline(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with running_pipeline(
        tmp_path_factory.mktemp("kaiwo"),
        real=real_cluster,
        service_env={"KAIWO_RESYNC_EVERY_SECONDS": str(RESYNC_SECONDS)},
    ) as running:
        yield running


async def name_conflict(p: Pipeline, workload: str) -> dict[str, Any]:
    """The KaiwoJob's ``NameConflict`` condition, once it has one."""

    async def check() -> dict[str, Any] | Pending:
        found = await p.child(resources.KAIWO_JOB, workload)
        conditions = ((found or {}).get("status") or {}).get("conditions") or []
        for condition in conditions:
            if condition["type"] == "NameConflict":
                return dict(condition)
        return Pending(f"conditions {[c['type'] for c in conditions]}")

    return await eventually(check, what=f"KaiwoJob {workload} with condition NameConflict")


async def warnings(p: Pipeline, workload: str) -> list[str]:
    events = await p.kube.list(resources.EVENT, namespace=p.namespace)
    return [
        e["message"]
        for e in events.items
        if e["involvedObject"].get("name") == workload and e.get("reason") == "NameConflict"
    ]


async def deleted_with_its_dependents(p: Pipeline, workload: str) -> None:
    """Foreground deletion: the KaiwoJob is gone only once the garbage collector has deleted
    everything that names it as an owner."""
    await p.kube.delete(
        resources.KAIWO_JOB, workload, namespace=p.namespace, propagation="Foreground"
    )

    async def gone() -> bool | Pending:
        found = await p.child(resources.KAIWO_JOB, workload)
        return True if found is None else Pending("the garbage collector is not done")

    await eventually(
        gone, what=f"KaiwoJob {workload} and its dependents deleted", within=GC_SECONDS
    )


async def test_someone_elses_objects_are_never_taken_over_nor_deleted_with_the_kaiwojob(
    pipeline: Pipeline,
) -> None:
    p, ns = pipeline, pipeline.namespace
    foreign = {
        (resources.CONFIG_MAP, "payroll-download"): await p.kube.create(
            config_map("payroll-download", ns)
        ),
        (resources.PERSISTENT_VOLUME_CLAIM, "ds-data"): await p.kube.create(
            volume_claim("ds-data", ns)
        ),
        (resources.JOB, "report"): await p.kube.create(job("report", ns)),
    }
    wants = {
        "payroll": "ConfigMap/{ns}/payroll-download",
        "ds": "PersistentVolumeClaim/{ns}/ds-data",
        "report": "Job/{ns}/report",
    }
    await p.kube.create(actors.training_job("payroll", namespace=ns))
    await p.kube.create(actors.training_job("ds", namespace=ns))
    await p.kube.create(actors.training_job("report", namespace=ns, download=False))

    for workload, taken in wants.items():
        condition = await name_conflict(p, workload)
        assert condition["status"] == "True"
        assert condition["reason"] == "NameTaken"
        assert condition["message"].startswith(
            f"{taken.format(ns=ns)} exists and is not this owner's (controlled by nobody)"
        )
        assert [m.split(" exists")[0] for m in await warnings(p, workload)] == [taken.format(ns=ns)]
    # Nothing of theirs was written: the plan's objects that could use the name wait too.
    assert await p.child(resources.JOB, "payroll-download") is None
    assert await p.child(resources.PERSISTENT_VOLUME_CLAIM, "payroll-data") is None
    assert await p.child(resources.JOB, "ds-download") is None
    for (resource, name), before in foreign.items():
        live = await p.child(resource, name)
        assert live is not None
        # Their own controllers may write them (the Job controller its status): none of ours.
        assert not {e["manager"] for e in live["metadata"]["managedFields"]} & OPERATOR_MANAGERS
        assert "ownerReferences" not in live["metadata"]
        assert live["metadata"].get("labels") == before["metadata"].get("labels")
        assert (live.get("spec"), live.get("data")) == (before.get("spec"), before.get("data"))

    for workload in wants:
        await deleted_with_its_dependents(p, workload)

    for (resource, name), before in foreign.items():
        live = await p.child(resource, name)
        assert live is not None, f"{resource.kind} {name} was deleted with a KaiwoJob"
        assert live["metadata"]["uid"] == before["metadata"]["uid"]


async def test_once_the_name_is_free_the_kaiwojob_goes_on_and_the_condition_goes(
    pipeline: Pipeline,
) -> None:
    p, ns = pipeline, pipeline.namespace
    await p.kube.create(config_map("ledger-download", ns))
    await p.kube.create(actors.training_job("ledger", namespace=ns))
    await name_conflict(p, "ledger")

    await p.kube.delete(resources.CONFIG_MAP, "ledger-download", namespace=ns)

    ours = await p.appears(resources.CONFIG_MAP, "ledger-download")
    workload = await p.kaiwo_job("ledger")
    assert [r["uid"] for r in ours["metadata"]["ownerReferences"]] == [workload["metadata"]["uid"]]
    await p.appears(resources.JOB, "ledger-download")

    async def cleared() -> bool | Pending:
        found = await p.kaiwo_job("ledger")
        types = [c["type"] for c in (found.get("status") or {}).get("conditions") or []]
        return True if "NameConflict" not in types else Pending(f"conditions {types}")

    await eventually(cleared, what="the NameConflict condition gone")
    with contextlib.suppress(NotFound):
        await p.kube.delete(resources.KAIWO_JOB, "ledger", namespace=ns)
