"""The peer the pipeline benchmark compares the operator with: a minimal kopf operator that
creates one batch Job for each KaiwoJob and does nothing else (no status, no audit trail).

Run by ``bench/pipeline.py`` as its own process against the same API server, with the same
load: ``python bench/peer_kopf.py --kubeconfig FILE --namespace NS``. It prints ``ready``
on standard output once kopf is watching KaiwoJobs.

The Job is created suspended, as the operator creates it for Kueue: the kube-controller-
manager then makes no Pods for either of them, so the API server's and etcd's share is the
same work on both sides. Kopf's defaults are kept (its progress is stored in annotations on
the KaiwoJob, a patch per object; since kopf 1.45 no Events unless a handler posts one), except
that it runs standalone (no peering objects) and watches only the benchmark's namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import kopf
import yaml
from kubernetes_asyncio import client, config

GROUP = "kaiwo.silogen.ai"
VERSION = "v1alpha1"
PLURAL = "kaiwojobs"


def job_for(kaiwo_job: kopf.Body) -> dict[str, Any]:
    """The batch Job of a KaiwoJob: its image and entrypoint, its GPUs as limits."""
    spec = kaiwo_job.spec
    resources = {}
    if spec.get("gpus"):
        vendor = "amd.com/gpu" if spec.get("gpuVendor", "amd") == "amd" else "nvidia.com/gpu"
        resources = {"limits": {vendor: str(spec["gpus"])}}
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": kaiwo_job.meta.name, "namespace": kaiwo_job.meta.namespace},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": spec.get("image", "busybox"),
                            "command": ["sh", "-c", spec.get("entrypoint", "true")],
                            "resources": resources,
                        }
                    ],
                }
            },
        },
    }
    kopf.adopt(job, owner=kaiwo_job)
    return job


async def open_batch_api(kubeconfig: str) -> client.BatchV1Api:
    api = await config.new_client_from_config(config_file=kubeconfig)
    # As the operator's adapter does (decision 0010): without this, every request of
    # kubernetes_asyncio looks up proxy variables and reads ~/.netrc in a thread.
    api.rest_client.pool_manager._trust_env = False
    return client.BatchV1Api(api)


def connection_info(kubeconfig: str) -> kopf.ConnectionInfo:
    """The current context of a kubeconfig with client-certificate files (as envtest's)."""
    document = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in document["contexts"] if c["name"] == document["current-context"])
    cluster = next(c for c in document["clusters"] if c["name"] == context["context"]["cluster"])
    user = next(u for u in document["users"] if u["name"] == context["context"]["user"])
    return kopf.ConnectionInfo(
        server=cluster["cluster"]["server"],
        ca_path=cluster["cluster"].get("certificate-authority"),
        certificate_path=user["user"].get("client-certificate"),
        private_key_path=user["user"].get("client-key"),
    )


def register(registry: kopf.OperatorRegistry, *, kubeconfig: str) -> None:
    @kopf.on.startup(registry=registry)
    async def connect(memo: kopf.Memo, **_: Any) -> None:
        memo["batch"] = await open_batch_api(kubeconfig)

    @kopf.on.cleanup(registry=registry)
    async def disconnect(memo: kopf.Memo, **_: Any) -> None:
        await memo["batch"].api_client.close()

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    async def create_job(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        batch: client.BatchV1Api = memo["batch"]
        try:
            await batch.create_namespaced_job(body.meta.namespace, job_for(body))
        except client.ApiException as error:
            if error.status != 409:  # already there: a retried handler
                raise


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    arguments = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    registry = kopf.OperatorRegistry()
    register(registry, kubeconfig=arguments.kubeconfig)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(arguments.kubeconfig)

    ready = asyncio.Event()

    async def operate() -> None:
        announce = asyncio.create_task(say_ready(ready))
        try:
            await kopf.operator(
                registry=registry,
                standalone=True,
                namespaces=[arguments.namespace],
                ready_flag=ready,
            )
        finally:
            announce.cancel()

    asyncio.run(operate())
    return 0


async def say_ready(ready: asyncio.Event) -> None:
    await ready.wait()
    sys.stdout.write("ready\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
