"""The parts a test plays around KubeAI Models: the platform team's system configuration and
the kubelet of model-server Pods (there is none on the test's API server)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any, Final

from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.subjects import scale_subject
from kaiwo_contracts.plans import ObjectRef
from kaiwo_kube import AlreadyExists, KubernetesPort, NotFound, resources
from kaiwo_sandbox.volumes import volume_for

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually

OPERATOR_NAMESPACE: Final = "kaiwo-system"
MODELS_CONFIG_NAME: Final = "kaiwo-models"
MODELS_CONFIG: Final = """\
resourceProfiles:
  mi300x:
    imageName: amd-gpu
    requests: {cpu: "4", memory: 16Gi}
    limits: {amd.com/gpu: "1"}
cacheProfiles:
  shared:
    sharedFilesystem: {storageClassName: nfs-rwx}
  unbound:
    sharedFilesystem: {storageClassName: no-such-class}
  premade:
    sharedFilesystem: {storageClassName: nfs-rwx}
"""


async def apply_models_config(kube: KubernetesPort, *, models_yaml: str = MODELS_CONFIG) -> None:
    """The system configuration of Models, in the operator's namespace."""
    with contextlib.suppress(AlreadyExists):
        await actors.create_namespace(kube, OPERATOR_NAMESPACE)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": MODELS_CONFIG_NAME,
            "namespace": OPERATOR_NAMESPACE,
            "labels": {"kaiwo.silogen.ai/system-config": "models"},
        },
        "data": {"models.yaml": models_yaml},
    }
    await kube.apply(config_map, field_manager="platform-team")


async def remove_models_config(kube: KubernetesPort) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(resources.CONFIG_MAP, MODELS_CONFIG_NAME, namespace=OPERATOR_NAMESPACE)


def a_model(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def model(pipeline: Pipeline, name: str) -> dict[str, Any]:
    return await pipeline.kube.get(resources.KUBEAI_MODEL, name, namespace=pipeline.namespace)


def condition(found: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (found.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c["type"] == kind), None)


async def model_pods(kube: KubernetesPort, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = await kube.list(resources.POD, namespace=namespace, label_selector=f"model={name}")
    return sorted(listed.items, key=lambda p: p["metadata"]["name"])


def is_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


async def run_pods(
    kube: KubernetesPort, namespace: str, name: str, *, pod_ip: str | None = None
) -> int:
    """The kubelet: every Pod of the Model not being deleted runs and turns Ready (at
    ``pod_ip``, where a test serves the model itself). Returns how many it started; a pod
    deleted meanwhile is passed over."""
    started = 0
    for pod in await model_pods(kube, namespace, name):
        if is_ready(pod) or pod["metadata"].get("deletionTimestamp"):
            continue
        status: dict[str, Any] = {
            "phase": "Running",
            "startTime": actors.now(),
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": actors.now()},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": actors.now()},
            ],
        }
        if pod_ip is not None:
            status |= {"podIP": pod_ip, "podIPs": [{"ip": pod_ip}]}
        with contextlib.suppress(NotFound):
            await kube.patch_status(
                resources.POD,
                pod["metadata"]["name"],
                status,
                namespace=namespace,
                field_manager="kubelet",
                method="merge",
            )
            started += 1
    return started


async def bound_cache_volume(pipeline: Pipeline, profile: str = "shared") -> dict[str, Any]:
    """The profile's shared cache volume, bound as a provisioner binds it: a volume reserved
    for the claim, which the real volume controller binds. A load Job's pod runs only on a
    bound volume; one never bound holds no files (decision 0202)."""
    name = f"shared-model-cache-{profile}"
    claim = await pipeline.appears(resources.PERSISTENT_VOLUME_CLAIM, name)
    with contextlib.suppress(AlreadyExists):
        await pipeline.kube.create(volume_for(claim))

    async def bound() -> dict[str, Any] | Pending:
        found = await pipeline.kube.get(
            resources.PERSISTENT_VOLUME_CLAIM, name, namespace=pipeline.namespace
        )
        phase = (found.get("status") or {}).get("phase")
        return found if phase == "Bound" else Pending(f"phase {phase}")

    return await eventually(bound, what=f"{name} bound")


async def serving(pipeline: Pipeline, name: str, replicas: int) -> dict[str, Any]:
    """Play the kubelet until the Model's status counts ``replicas`` Pods, all Ready."""
    kube, namespace = pipeline.kube, pipeline.namespace

    async def check() -> dict[str, Any] | Pending:
        await run_pods(kube, namespace, name)
        found = await model(pipeline, name)
        counted = (found.get("status") or {}).get("replicas")
        ready = condition(found, "Ready")
        wanted = {"all": replicas, "ready": replicas}
        if counted == wanted and ready is not None and ready["status"] == "True":
            return found
        return Pending(f"replicas {counted}, Ready {ready}")

    return await eventually(check, what=f"Model {name} serves {replicas} replicas", within=60)


async def decide_scale(pipeline: Pipeline, name: str, *, replicas: int) -> dict[str, Any]:
    """Publish the autoscaler's decision for the Model as it is now (as the gateway replica
    leading the autoscaler would; the test's NATS identity is the administrator)."""
    found = await model(pipeline, name)
    metadata = found["metadata"]
    decision = ScaleDecidedV1(
        model=ObjectRef(
            api_version="kubeai.org/v1",
            kind="Model",
            name=name,
            namespace=metadata["namespace"],
            uid=metadata["uid"],
        ),
        generation=metadata["generation"],
        from_replicas=found["spec"].get("replicas") or 0,
        replicas=replicas,
        cause="load",
        active_requests=float(replicas),
        average_active_requests=float(replicas),
        window_seconds=60.0,
        samples=6,
        target_requests=1,
        scale_down_delay_seconds=0,
        reason=f"scale to {replicas}: decided by the test",
    )
    envelope = Envelope.new(
        data=decision,
        source="/kaiwo/gateway",
        time=datetime.now(UTC),
        correlationid=metadata["uid"],
        subject=f"{metadata['namespace']}/{name}",
    )
    headers, body = envelope.to_nats()
    await pipeline.js.publish(
        scale_subject(namespace=metadata["namespace"], uid=metadata["uid"]),
        body,
        headers=dict(headers),
    )
    return found
