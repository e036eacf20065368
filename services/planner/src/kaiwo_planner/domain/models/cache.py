"""Cache profiles: a volume per profile shared by its Models, a Job that loads each Model's
files into it once, another that evicts them when the Model goes.

* The volume ``shared-model-cache-<profile>`` (ReadWriteMany) holds a directory per Model
  (``models/<name>-<uid>``). It belongs to no Model: every Model of the profile in the
  namespace asks for it as a *shared* object (created when missing, never updated, never
  pruned), so it outlives them, as upstream's does.
* ``load-cache-<name>`` downloads the Model's files into its directory. Until it has
  completed the Model has no Pods. Once it has, ``status.cache.loaded`` turns true, with the
  volume's uid in ``status.cache.volumeUID``, and stays so while that volume does (the
  planner plans from the status it last decided), and the Job, no longer wanted, is pruned.
  A volume being deleted, gone, or made anew (another uid) holds the files no more: loaded
  turns false and the Job runs again before any new Pod. A failed Job stays for its logs,
  with the reason in the ``CacheLoaded`` condition; deleting it starts another, as does an
  edit of what it was made from. A Job's pod template cannot change: a load Job under way
  goes on as it was made, and the condition names the edit it did not take (decision 0124).
* Deleting a Model with a cache: its finalizer ``kubeai.org/cache-eviction`` holds it while
  ``evict-cache-<name>`` removes its directory; once that Job has completed (or when the
  volume does not exist) the plan drops the finalizer. A failed eviction keeps it, with the
  reason in the ``CacheEvicted`` condition.

Upstream records "loaded" as an annotation on the shared volume, written by every Model
using it; applied from several owners under one field manager, each Model's write would
remove the others', so here the Model's own status keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from kaiwo_contracts.models_config import SharedFilesystem
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.children.labels import LABEL_MANAGED_BY, MANAGED_BY_KAIWO
from kaiwo_planner.domain.models.credentials import SourceAdditions, sorted_env
from kaiwo_planner.domain.models.names import (
    LABEL_CACHE_PROFILE,
    cache_directory,
    cache_volume,
    evict_job,
    load_job,
)
from kaiwo_planner.domain.models.ownership import model_child_metadata
from kaiwo_planner.domain.state.cluster import ClusterState

CACHE_VOLUME: Final = "models"
CACHE_ROOT: Final = "/models"
ACCESS_MODE: Final = "ReadWriteMany"


class JobState(StrEnum):
    ABSENT = "Absent"
    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class JobOutcome:
    state: JobState
    message: str = ""


def job_outcome(job: Mapping[str, Any] | None) -> JobOutcome:
    """What a Job's status says: Complete or Failed (with the controller's message)."""
    if job is None:
        return JobOutcome(JobState.ABSENT)
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("status") != "True":
            continue
        if condition.get("type") in {"Complete", "SuccessCriteriaMet"}:
            return JobOutcome(JobState.COMPLETE)
        if condition.get("type") == "Failed":
            reason = condition.get("reason") or "Failed"
            message = condition.get("message") or ""
            return JobOutcome(JobState.FAILED, f"{reason}: {message}".rstrip(": "))
    return JobOutcome(JobState.RUNNING)


def cache_volume_manifest(
    namespace: str, profile: str, filesystem: SharedFilesystem
) -> dict[str, Any]:
    """The shared volume of a cache profile in a namespace (a shared object: no owner)."""
    spec: dict[str, Any] = {
        "accessModes": [ACCESS_MODE],
        "resources": {"requests": {"storage": filesystem.size}},
        # Only a volume named: "" keeps the cluster's default class from taking it.
        "storageClassName": filesystem.storage_class_name or "",
    }
    if filesystem.persistent_volume_name:
        spec["volumeName"] = filesystem.persistent_volume_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": cache_volume(profile),
            "namespace": namespace,
            "labels": {LABEL_MANAGED_BY: MANAGED_BY_KAIWO, LABEL_CACHE_PROFILE: profile},
        },
        "spec": spec,
    }


def observed_cache_volume(
    cluster: ClusterState, *, namespace: str, profile: str
) -> Mapping[str, Any] | None:
    """The profile's shared volume in ``namespace`` as observed, or None."""
    return cluster.find_object(
        group="", kind="PersistentVolumeClaim", name=cache_volume(profile), namespace=namespace
    )


def never_bound(volume: Mapping[str, Any] | None) -> bool:
    """Whether a PersistentVolumeClaim has not been bound yet (``Pending``): nothing was ever
    written to it. A claim goes from ``Pending`` to ``Bound`` once and never back; one whose
    storage class waits for its first consumer stays ``Pending`` until a pod using it is
    scheduled, and one whose storage class does not exist, for good."""
    return ((volume or {}).get("status") or {}).get("phase") == "Pending"


def cache_pod_volume(profile: str) -> dict[str, Any]:
    return {"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": cache_volume(profile)}}


def server_cache_mount(identity: ObjectRef) -> dict[str, Any]:
    """The Model's directory, read-only, where the server reads its files."""
    directory = cache_directory(identity.name, identity.uid or "")
    return {
        "name": CACHE_VOLUME,
        "mountPath": f"/{directory}",
        "subPath": directory,
        "readOnly": True,
    }


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What the cache Jobs share with the server Pods (from the system configuration)."""

    image: str
    pod_security_context: Mapping[str, Any] | None
    security_context: Mapping[str, Any] | None
    image_pull_secrets: tuple[str, ...]


def load_job_manifest(
    identity: ObjectRef,
    *,
    url: str,
    profile: str,
    settings: JobSettings,
    env: Mapping[str, str],
    credentials: SourceAdditions,
    env_from: tuple[Mapping[str, Any], ...],
) -> dict[str, Any]:
    """``load-cache-<name>``: the model-loader image's ``load <url> <directory>``."""
    directory = cache_directory(identity.name, identity.uid or "")
    container: dict[str, Any] = {
        "name": "loader",
        "image": settings.image,
        "args": [url, f"/{directory}"],
        "env": [*sorted_env(env), *credentials.env],
        "volumeMounts": [
            {"name": CACHE_VOLUME, "mountPath": f"/{directory}", "subPath": directory},
            *credentials.mounts,
        ],
    }
    if env_from:
        container["envFrom"] = [dict(source) for source in env_from]
    volumes: list[Mapping[str, Any]] = [cache_pod_volume(profile), *credentials.volumes]
    return _job(identity, load_job(identity.name), container, volumes, settings)


def evict_job_manifest(
    identity: ObjectRef, *, profile: str, settings: JobSettings
) -> dict[str, Any]:
    """``evict-cache-<name>``: removes the Model's directory from the volume."""
    container = {
        "name": "evictor",
        "image": settings.image,
        "command": ["bash", "-c", f"rm -rf {CACHE_ROOT}/{identity.name}-{identity.uid or ''}"],
        "volumeMounts": [{"name": CACHE_VOLUME, "mountPath": CACHE_ROOT, "subPath": "models"}],
    }
    return _job(
        identity, evict_job(identity.name), container, [cache_pod_volume(profile)], settings
    )


def _job(
    identity: ObjectRef,
    name: str,
    container: dict[str, Any],
    volumes: list[Mapping[str, Any]],
    settings: JobSettings,
) -> dict[str, Any]:
    if settings.security_context:
        container["securityContext"] = dict(settings.security_context)
    pod: dict[str, Any] = {
        "restartPolicy": "OnFailure",
        "containers": [container],
        "volumes": volumes,
    }
    if settings.pod_security_context:
        pod["securityContext"] = dict(settings.pod_security_context)
    if settings.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in settings.image_pull_secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": model_child_metadata(identity, name=name),
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": pod}},
    }
