"""A cluster without Kueue (or KubeRay, or AppWrapper) is told as such (decision 0262).

``kaiwo up`` against a cluster that lacked Kueue said nothing of it: every KaiwoJob waited in
PENDING "pending admission" for ever, ``kaiwo queues`` asked whether a KaiwoQueueConfig was
applied (it was) and the KaiwoQueueConfig quoted "404 page not found". The fake API server
serves a custom kind only once its CRD exists, as a real one does."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_cli.stack.cluster_setup import prepare_cluster
from kaiwo_cli.stack.options import StackOptions
from kaiwo_cli.stack.prerequisites import missing_prerequisites, prerequisites_note
from kaiwo_cli.stack.third_party import open_schema_crd
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer


async def test_kaiwo_queues_says_kueue_is_not_installed(tmp_path: Path) -> None:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        env = {"KAIWO_STATE": str(tmp_path / "no-stack"), "KAIWOCONFIG": str(tmp_path / "none")}
        arguments = ["queues", "--kubeconfig", str(server.kubeconfig_path)]

        result = await asyncio.to_thread(CliRunner().invoke, app, arguments, env=env)

    assert (result.exit_code, result.output) == (
        0,
        "Kueue is not installed: the cluster does not serve kueue.x-k8s.io/v1beta1 "
        "ClusterQueues, so no workload is admitted (KaiwoJobs and KaiwoServices wait in "
        "PENDING) and the KaiwoQueueConfig makes no queues; install it: docs/operations.md, "
        "What the cluster needs\n",
    )


async def test_kaiwo_up_names_the_apis_the_cluster_does_not_serve(tmp_path: Path) -> None:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        async with await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path) as kube:
            await kube.ensure_crds([open_schema_crd(resources.KUEUE_WORKLOAD)], field_manager="t")
        # A real cluster (not --fake) whose scheduler is left as it is.
        options = StackOptions(state_dir=tmp_path / "state", scheduler="existing")

        prepared = await prepare_cluster(options, server.kubeconfig_path)

    assert prepared.prerequisites_note == (
        "NOT SERVED: KubeRay (ray.io/v1 RayJob): Ray KaiwoJobs and KaiwoServices never start; "
        "AppWrapper (workload.codeflare.dev/v1beta2 AppWrapper): Ray KaiwoServices never "
        "start. Install what is missing: docs/operations.md, What the cluster needs"
    )


def test_a_crd_that_no_longer_serves_the_version_counts_as_missing() -> None:
    served = {
        "spec": {"versions": [{"name": "v1beta1", "served": True}]},
    }
    not_served = {
        "spec": {"versions": [{"name": "v1beta1", "served": False}, {"name": "v1beta2"}]},
    }
    crds = {
        "rayjobs.ray.io": {"spec": {"versions": [{"name": "v1", "served": True}]}},
        "appwrappers.workload.codeflare.dev": {
            "spec": {"versions": [{"name": "v1beta2", "served": True}]}
        },
    }

    assert (
        prerequisites_note(missing_prerequisites({**crds, "workloads.kueue.x-k8s.io": served}))
        == "Kueue, KubeRay, AppWrapper served"
    )
    assert prerequisites_note(
        missing_prerequisites({**crds, "workloads.kueue.x-k8s.io": not_served})
    ) == (
        "NOT SERVED: Kueue (kueue.x-k8s.io/v1beta1 Workload): every KaiwoJob and KaiwoService "
        "waits in PENDING, and the KaiwoQueueConfig makes no queues. Install what is "
        "missing: docs/operations.md, What the cluster needs"
    )
    assert prerequisites_note(None) == (
        "not checked: the CustomResourceDefinitions could not be read"
    )
