"""The model-server Pod of a Model: one ``server`` container, as upstream builds it (§4.2).

* Labels ``model``, ``app: model``, ``app.kubernetes.io/name: <engine>``,
  ``app.kubernetes.io/instance: <engine>-<name>`` and ``pod-hash``; annotation
  ``model-pod-port: "8000"``. ``app.kubernetes.io/managed-by`` is ``kaiwo`` (upstream
  ``kubeai``): with ``kaiwo.silogen.ai/owner-uid`` it is the inventory the watcher and the
  executor select by.
* Scheduling from the resource profile; priority class from the Model; service account, pod
  security context and pull secrets from the configuration (then the namespace's
  AIMNamespaceConfig pull secrets); the container security context from the configuration
  for every engine (upstream leaves it off Infinity's, by oversight).
* Variables: the engine's, then ``spec.env`` sorted by name, then the source's credentials;
  each name once, the user's value winning: an engine's variable or a credential that
  ``spec.env`` names is left out (upstream lists both, and the API server's apply refuses a
  container with two variables of one name: the Model got no Pods; decision 0212).
  ``spec.envFrom`` as given.
* Volumes in upstream's order: shared memory, files, adapters, cache, source.

``pod-hash`` is a hash of the Pod's ``spec`` and of ``spec.files``' content: any change of
what the Pod runs (arguments, image, resources, files, the configuration's images...) gives
new Pods, which the rollout puts in place of the old ones
(:mod:`~kaiwo_planner.domain.models.rollout`). Labels and annotations are not hashed.
Upstream hashes the spec alone, so an edited file reaches its ConfigMap but never a running
server (each file is a ``subPath`` mount, which the kubelet never refreshes): the Model said
Ready on the current spec while every Pod served the old content (decision 0127).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef, canonical_json_bytes

from kaiwo_planner.domain.models.adapters import (
    adapter_volumes,
    loader_container,
    server_adapter_mount,
    uses_adapters,
)
from kaiwo_planner.domain.models.cache import cache_pod_volume, server_cache_mount
from kaiwo_planner.domain.models.credentials import (
    SourceAdditions,
    sorted_env,
    source_additions,
    unique_volumes,
)
from kaiwo_planner.domain.models.engines import engine_container
from kaiwo_planner.domain.models.files import files_mounts, files_volume
from kaiwo_planner.domain.models.json_patch import apply_patches
from kaiwo_planner.domain.models.names import (
    ANNOTATION_POD_PORT,
    APP_MODEL,
    LABEL_APP,
    LABEL_APP_INSTANCE,
    LABEL_APP_NAME,
    LABEL_MODEL,
    LABEL_POD_HASH,
    SERVER_CONTAINER,
    SERVER_PORT,
    engine_label,
    pod_name,
)
from kaiwo_planner.domain.models.ownership import model_child_metadata, model_ref
from kaiwo_planner.domain.models.setup import ModelSetup

HASH_LENGTH: Final = 10


@dataclass(frozen=True, slots=True)
class ServerPod:
    """The Pod every replica of a Model runs, but for its name."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    spec: Mapping[str, Any]
    pod_hash: str

    def manifest(self, identity: ObjectRef, slot_name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": model_child_metadata(
                identity, name=slot_name, labels=self.labels, annotations=self.annotations
            ),
            "spec": self.spec,
        }

    def name(self, identity: ObjectRef, slot: int) -> str:
        return pod_name(identity.name, self.pod_hash, slot)


def identity_of(setup: ModelSetup) -> ObjectRef:
    return model_ref(name=setup.name, namespace=setup.namespace_name, uid=setup.uid)


def server_pod(setup: ModelSetup) -> ServerPod:
    """The Pod of ``setup``'s Model (see the module docstring). Raises
    :class:`~kaiwo_planner.domain.models.json_patch.JsonPatchError` when a configured JSON
    patch cannot be applied."""
    identity = identity_of(setup)
    engine = engine_label(setup.engine)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": identity.namespace or "",
            "labels": {
                LABEL_MODEL: setup.name,
                LABEL_APP: APP_MODEL,
                LABEL_APP_NAME: engine,
                LABEL_APP_INSTANCE: f"{engine}-{setup.name}",
            },
            "annotations": {ANNOTATION_POD_PORT: str(SERVER_PORT)},
        },
        "spec": _pod_spec(setup, identity),
    }
    patches = [patch.to_wire() for patch in setup.config.model_server_pods.json_patches]
    if patches:
        # Only labels, annotations and spec are taken back: name, namespace and owner are
        # the plan's.
        pod = apply_patches(pod, patches)
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    pod_hash = _pod_hash(spec, setup)
    return ServerPod(
        labels={**(meta.get("labels") or {}), LABEL_POD_HASH: pod_hash},
        annotations=dict(meta.get("annotations") or {}),
        spec=spec,
        pod_hash=pod_hash,
    )


def _pod_hash(spec: Mapping[str, Any], setup: ModelSetup) -> str:
    """The hash of what the Pod runs: its spec, and the files' content it mounts (the spec
    names only their ConfigMap). Without files, the spec's hash alone, as before files
    were hashed: Models without files keep their Pods across that change."""
    files = {f.path: f.content for f in setup.model.spec.files or ()}
    hashed: Any = {"spec": spec, "files": files} if files else spec
    return hashlib.sha256(canonical_json_bytes(hashed)).hexdigest()[:HASH_LENGTH]


def _source(setup: ModelSetup) -> SourceAdditions:
    # A cached model is read from the cache: only the loader Job needs the credentials.
    if setup.cache is not None:
        return SourceAdditions()
    return source_additions(
        setup.source,
        secrets=setup.config.secret_names,
        namespace=setup.namespace,
        user_env=setup.model.spec.env or {},
    )


def _server_container(setup: ModelSetup, identity: ObjectRef) -> dict[str, Any]:
    spec = setup.model.spec
    engine = engine_container(setup)
    source = _source(setup)
    files = {f.path: f.content for f in spec.files or ()}
    mounts: list[Any] = [
        {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108 - shared memory, not temp files
        *files_mounts(files),
    ]
    if uses_adapters(setup.model):
        mounts.append(server_adapter_mount())
    if setup.cache is not None:
        mounts.append(server_cache_mount(identity))
    mounts += source.mounts
    container: dict[str, Any] = {"name": SERVER_CONTAINER, "image": setup.image}
    if engine.command is not None:
        container["command"] = list(engine.command)
    if engine.args:
        container["args"] = list(engine.args)
    env = server_env(engine.env, spec.env or {}, source.env)
    if env:
        container["env"] = env
    if spec.env_from:
        container["envFrom"] = [source_.to_wire() for source_ in spec.env_from]
    resources = _resources(setup)
    if resources:
        container["resources"] = resources
    container |= {
        "ports": [{"containerPort": SERVER_PORT, "name": "http", "protocol": "TCP"}],
        "startupProbe": dict(engine.startup_probe),
        "readinessProbe": dict(engine.readiness_probe),
        "livenessProbe": dict(engine.liveness_probe),
        "volumeMounts": mounts,
    }
    security = setup.config.model_server_pods.security_context
    if security:
        container["securityContext"] = dict(security)
    return container


def server_env(
    engine: Sequence[Mapping[str, Any]],
    user: Mapping[str, str],
    source: Sequence[Mapping[str, Any]],
) -> list[Mapping[str, Any]]:
    """The server's variables: the engine's, ``user`` (``spec.env``) sorted by name, the
    source's; a name ``user`` sets is the user's alone (see the module docstring). Without
    such a name, exactly upstream's list: no running Pod changes."""
    return [
        *(variable for variable in engine if variable["name"] not in user),
        *sorted_env(user),
        *(variable for variable in source if variable["name"] not in user),
    ]


def _resources(setup: ModelSetup) -> dict[str, Any]:
    found = setup.resources
    resources: dict[str, Any] = {}
    if found.requests:
        resources["requests"] = dict(found.requests)
    if found.limits:
        resources["limits"] = dict(found.limits)
    return resources


def _pod_spec(setup: ModelSetup, identity: ObjectRef) -> dict[str, Any]:
    spec = setup.model.spec
    files = {f.path: f.content for f in spec.files or ()}
    containers = [_server_container(setup, identity)]
    volumes: list[Any] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        *files_volume(identity, files),
    ]
    pod: dict[str, Any] = {}
    if uses_adapters(setup.model):
        containers.append(loader_container(setup))
        volumes += adapter_volumes(identity, setup)
        # The API token goes to the adapter loader alone (its own projected volume).
        pod["automountServiceAccountToken"] = False
    if setup.cache is not None:
        volumes.append(cache_pod_volume(setup.cache.profile))
    volumes += _source(setup).volumes
    pod |= {"containers": containers, "volumes": list(unique_volumes(volumes))}
    pod |= _scheduling(setup)
    return pod


def _scheduling(setup: ModelSetup) -> dict[str, Any]:
    found = setup.resources
    pods = setup.config.model_server_pods
    fields: dict[str, Any] = {
        "nodeSelector": dict(found.node_selector),
        "affinity": dict(found.affinity) if found.affinity else None,
        "tolerations": [dict(t) for t in found.tolerations],
        "schedulerName": found.scheduler_name,
        "runtimeClassName": found.runtime_class_name,
        "priorityClassName": setup.model.spec.priority_class_name,
        "serviceAccountName": pods.service_account_name,
        "securityContext": dict(pods.pod_security_context) if pods.pod_security_context else None,
    }
    pull_secrets = [s.name for s in pods.image_pull_secrets]
    pull_secrets += [n for n in setup.namespace.image_pull_secrets if n not in pull_secrets]
    fields["imagePullSecrets"] = [{"name": name} for name in pull_secrets]
    return {key: value for key, value in fields.items() if value}
