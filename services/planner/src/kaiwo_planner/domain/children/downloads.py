"""The download ConfigMap and download Job that fill a workload's volumes before it starts.

Credentials never appear in a manifest: each secret reference of a download item becomes a
Secret volume mounted under ``/app/secrets/<secretName>/``, and a key whose reference gives
its own ``file`` is mounted at that path too (the downloader reads the file named in the
item's ``file``, the seed's "where the secret value will be mounted"). The Hugging Face
token, when the namespace provides one, is an ``env`` entry with ``valueFrom.secretKeyRef``.

The config is written as JSON under ``config.yaml``: JSON is YAML, the downloader parses it
unchanged, and sorted-key JSON is byte-identical from run to run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.storage import (
    DOWNLOAD_CONFIG_ROOT,
    DOWNLOAD_KINDS,
    SECRETS_ROOT,
    secret_file,
)

from kaiwo_planner.domain.children.labels import DOWNLOADER_TYPE, LABEL_TYPE, system_labels
from kaiwo_planner.domain.children.naming import HASH_LENGTH, MAX_LABEL_LENGTH, child_name
from kaiwo_planner.domain.children.ownership import child_metadata
from kaiwo_planner.domain.children.pod_template import default_security_context
from kaiwo_planner.domain.children.storage import (
    DATA_VOLUME,
    HF_VOLUME,
    data_claim_name,
    hf_claim_name,
)
from kaiwo_planner.domain.settings.workload_inputs import StorageInputs
from kaiwo_planner.domain.state.json_trees import copy_tree
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

DOWNLOADER_IMAGE = "ghcr.io/silogen/kaiwo-python:0.6"
DOWNLOADER_CONTAINER = "data-downloader"
CONFIG_KEY = "config.yaml"
CONFIG_VOLUME = "config"
CONFIG_MOUNT_PATH = DOWNLOAD_CONFIG_ROOT
SECRET_VOLUME_PREFIX = "secret-"  # noqa: S105 - a volume name prefix, not a password
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

# The fields of each download item that reference a Secret.
SECRET_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "s3": ("accessKeyId", "secretKey"),
        "gcs": ("applicationCredentials",),
        "azureBlob": ("connectionString",),
        "git": ("username", "token"),
    }
)


def secret_volume_name(secret_name: str) -> str:
    """The download pod's volume for Secret ``secret_name``: ``secret-<name>`` when that is a
    DNS label, as a volume name must be. A Secret's name may have dots and 253 characters:
    then dots become ``-``, the name is cut to fit 63 and the first 8 hex digits of its
    SHA-256 follow, so two such Secrets never share a volume (decision 0119)."""
    name = f"{SECRET_VOLUME_PREFIX}{secret_name}"
    if len(name) <= MAX_LABEL_LENGTH and _DNS_LABEL.fullmatch(name):
        return name
    digest = hashlib.sha256(secret_name.encode()).hexdigest()[:HASH_LENGTH]
    room = MAX_LABEL_LENGTH - len(SECRET_VOLUME_PREFIX) - HASH_LENGTH - 1
    base = secret_name.replace(".", "-")[:room].strip("-")
    return f"{SECRET_VOLUME_PREFIX}{base}-{digest}" if base else f"{SECRET_VOLUME_PREFIX}{digest}"


def download_name(workload_name: str) -> str:
    """Name of both the download ConfigMap and the download Job."""
    return child_name(workload_name, "download")


def _secret_refs(downloads: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for kind in DOWNLOAD_KINDS:
        for item in downloads.get(kind) or []:
            for field_name in SECRET_FIELDS[kind]:
                ref = item.get(field_name)
                if ref and ref.get("secretName") and ref.get("secretKey"):
                    yield ref


def _with_secret_files(downloads: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the download items where every secret reference names its mounted file."""
    result = copy_tree(dict(downloads))
    for ref in _secret_refs(result):
        if not ref.get("file"):
            ref["file"] = secret_file(ref["secretName"], ref["secretKey"])
    return result


def download_config(storage: StorageInputs) -> dict[str, Any]:
    """The downloader's config: where to write and what to fetch, in the order it runs."""
    config: dict[str, Any] = {
        "downloadRoot": storage.data_mount_path if storage.has_data else "",
        "hfHome": storage.hf_mount_path if storage.has_hf else "",
    }
    if storage.has_object_downloads:
        with_files = _with_secret_files(storage.downloads)
        config.update({kind: with_files[kind] for kind in DOWNLOAD_KINDS if with_files.get(kind)})
    if storage.has_hf_downloads:
        config["hf"] = [
            {"repoId": repo.repo_id, "files": list(repo.files)}
            if repo.files
            else {"repoId": repo.repo_id}
            for repo in storage.hf_repos
        ]
    return config


def _labels(identity: WorkloadIdentity) -> dict[str, str]:
    return {**system_labels(identity), LABEL_TYPE: DOWNLOADER_TYPE}


def _config_text(storage: StorageInputs) -> str:
    return json.dumps(download_config(storage), indent=2, sort_keys=True)


DOWNLOAD_CONFIGURATION = "kaiwo.silogen.ai/download-configuration"
"""Annotation of the download Job: the first 16 hex digits of the SHA-256 of the configuration
(``config.yaml`` of the ConfigMap) it was made with. The ConfigMap follows the spec, the Job
runs once: an edit of what to download after that is told, not taken silently (0248)."""


def configuration_digest(storage: StorageInputs) -> str:
    return hashlib.sha256(_config_text(storage).encode()).hexdigest()[:16]


def made_with_configuration(job: Mapping[str, Any]) -> str | None:
    """The :data:`DOWNLOAD_CONFIGURATION` of a download Job (None: made before it existed)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(DOWNLOAD_CONFIGURATION)
    return value if isinstance(value, str) else None


def with_configuration(job: dict[str, Any], digest: str | None) -> dict[str, Any]:
    """``job`` naming ``digest`` as the configuration it was made with (None: naming none)."""
    metadata = job["metadata"]
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if k != DOWNLOAD_CONFIGURATION
    }
    if digest is not None:
        annotations[DOWNLOAD_CONFIGURATION] = digest
    trimmed = {k: v for k, v in metadata.items() if k != "annotations"}
    return {**job, "metadata": {**trimmed, **({"annotations": annotations} if annotations else {})}}


def download_config_map(identity: WorkloadIdentity, storage: StorageInputs) -> dict[str, Any]:
    text = _config_text(storage)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": child_metadata(
            identity, name=download_name(identity.name), labels=_labels(identity)
        ),
        "data": {CONFIG_KEY: text},
    }


def _secret_volumes(
    downloads: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One volume per Secret (its referenced keys as items) and its mount, and a mount of
    each key at the ``file`` its reference gives (the models refuse two values at one file)."""
    keys_by_secret: dict[str, list[str]] = {}
    given_files: dict[str, dict[str, Any]] = {}
    for ref in _secret_refs(downloads):
        secret_name, key = ref["secretName"], ref["secretKey"]
        keys = keys_by_secret.setdefault(secret_name, [])
        if key not in keys:
            keys.append(key)
        file = ref.get("file")
        if file and file != secret_file(secret_name, key):
            given_files.setdefault(
                file,
                {
                    "name": secret_volume_name(secret_name),
                    "mountPath": file,
                    "subPath": key,
                    "readOnly": True,
                },
            )
    volumes = []
    mounts = []
    for secret_name, keys in keys_by_secret.items():
        volume_name = secret_volume_name(secret_name)
        items = [{"key": key, "path": key} for key in keys]
        volumes.append({"name": volume_name, "secret": {"secretName": secret_name, "items": items}})
        mounts.append({"name": volume_name, "mountPath": f"{SECRETS_ROOT}/{secret_name}"})
    return volumes, mounts + list(given_files.values())


def download_job(
    identity: WorkloadIdentity,
    storage: StorageInputs,
    *,
    env: Sequence[Mapping[str, Any]] = (),
    dangerous: bool = False,
    pod_labels: Mapping[str, str] | None = None,
    pull_secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """The Job that runs the downloader once (no retries, not queued through Kueue).

    ``env`` is the workload's ``spec.env`` plus, when the namespace provides one, the Hugging
    Face token reference. It has no ``ttlSecondsAfterFinished``: the finished Job is the record
    that the download succeeded, and deleting it would make the next plan download again.
    Its pod is one of the workload's generated pods, so ``dangerous`` leaves out the default
    security context here too (the reference's rule, where upstream kept it: decision 0117),
    and it gets the workload's ``podTemplateSpecLabels`` (``pod_labels``, under the system
    labels, which win) and image pull secrets (``pull_secrets``), as the reference says of
    every generated pod (decision 0192; upstream gave it neither).
    """
    name = download_name(identity.name)
    volumes: list[dict[str, Any]] = [{"name": CONFIG_VOLUME, "configMap": {"name": name}}]
    mounts: list[dict[str, Any]] = [{"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH}]
    container_env: list[dict[str, Any]] = []
    if storage.has_object_downloads:
        volumes.append(
            {
                "name": DATA_VOLUME,
                "persistentVolumeClaim": {"claimName": data_claim_name(identity.name)},
            }
        )
        mounts.append({"name": DATA_VOLUME, "mountPath": storage.data_mount_path})
        secret_volumes, secret_mounts = _secret_volumes(storage.downloads)
        volumes.extend(secret_volumes)
        mounts.extend(secret_mounts)
    if storage.has_hf_downloads:
        volumes.append(
            {
                "name": HF_VOLUME,
                "persistentVolumeClaim": {"claimName": hf_claim_name(identity.name)},
            }
        )
        mounts.append({"name": HF_VOLUME, "mountPath": storage.hf_mount_path})
        container_env.append({"name": "HF_HOME", "value": storage.hf_mount_path})
    for variable in env:
        if all(existing["name"] != variable["name"] for existing in container_env):
            container_env.append(dict(variable))
    container: dict[str, Any] = {
        "name": DOWNLOADER_CONTAINER,
        "image": DOWNLOADER_IMAGE,
        "imagePullPolicy": "Always",
        "command": [
            "python",
            "-m",
            "kaiwo.downloader",
            "--log-level=INFO",
            f"{CONFIG_MOUNT_PATH}/{CONFIG_KEY}",
        ],
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "2", "memory": "4Gi"},
        },
        "volumeMounts": mounts,
    }
    if container_env:
        container["env"] = container_env
    labels = _labels(identity)
    pod_spec: dict[str, Any] = {
        **({} if dangerous else {"securityContext": default_security_context()}),
        "restartPolicy": "Never",
        "containers": [container],
        "volumes": volumes,
    }
    if pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": secret} for secret in pull_secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": child_metadata(
            identity,
            name=name,
            labels=labels,
            annotations={DOWNLOAD_CONFIGURATION: configuration_digest(storage)},
        ),
        "spec": {
            "backoffLimit": 0,
            "parallelism": 1,
            "template": {
                "metadata": {"labels": {**(pod_labels or {}), **labels}},
                "spec": pod_spec,
            },
        },
    }


DOWNLOADED_INTO = "kaiwo.silogen.ai/downloaded-into"
"""Annotation of the download Job: the uid of each PersistentVolumeClaim it fills, by claim
name, as sorted JSON. A claim deleted and made anew has the same name and a new uid: the
download in it is not the one this Job made (decision 0140)."""


def claim_uids(claims: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The uid of each observed claim, by name."""
    uids: dict[str, str] = {}
    for claim in claims:
        meta = claim.get("metadata")
        if not isinstance(meta, Mapping):
            continue
        name, uid = meta.get("name"), meta.get("uid")
        if isinstance(name, str) and isinstance(uid, str) and uid:
            uids[name] = uid
    return uids


def _claims_mounted(job: Mapping[str, Any]) -> list[str]:
    volumes = (((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes")
    names = []
    for volume in volumes or ():
        claim = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if isinstance(claim, Mapping) and isinstance(claim.get("claimName"), str):
            names.append(claim["claimName"])
    return names


def with_claims_it_fills(
    job: dict[str, Any], claims: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The download Job ``job`` annotated with the uids of the observed claims it mounts.

    A claim not observed yet (the plan that makes the claims makes the Job too) is left out;
    the plan that observes it writes its uid onto the Job (a metadata patch, once)."""
    uids = claim_uids(claims)
    filled = {name: uids[name] for name in _claims_mounted(job) if name in uids}
    if not filled:
        return job
    metadata = job["metadata"]
    annotations = {
        **metadata.get("annotations", {}),
        DOWNLOADED_INTO: json.dumps(filled, sort_keys=True),
    }
    return {**job, "metadata": {**metadata, "annotations": annotations}}


def _downloaded_into(job: Mapping[str, Any]) -> dict[str, str]:
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    try:
        filled = json.loads(annotations.get(DOWNLOADED_INTO) or "{}")
    except ValueError:  # edited by hand into something else: nothing known
        return {}
    if not isinstance(filled, dict):
        return {}
    return {k: v for k, v in filled.items() if isinstance(k, str) and isinstance(v, str)}


def claims_made_anew(
    job: Mapping[str, Any] | None,
    claims: Sequence[Mapping[str, Any]],
    *,
    succeeded_at: str | None = None,
) -> tuple[str, ...]:
    """The names of the claims a download filled that are gone or were made anew (empty).

    With the download Job observed: the claims its :data:`DOWNLOADED_INTO` names whose uid
    is no longer observed (a Job made before the annotation existed names none: trusted).
    With the Job removed (by someone) after it succeeded at ``succeeded_at`` (the
    ``DownloadJobSucceeded`` condition's ``lastTransitionTime``): the observed claims made
    after that moment, which cannot hold that download.
    """
    if job is not None:
        uids = claim_uids(claims)
        return tuple(
            sorted(name for name, uid in _downloaded_into(job).items() if uids.get(name) != uid)
        )
    succeeded = _moment(succeeded_at)
    if succeeded is None:
        return ()
    made_after = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        created = _moment(meta.get("creationTimestamp"))
        if created is not None and created > succeeded and isinstance(meta.get("name"), str):
            made_after.append(meta["name"])
    return tuple(sorted(made_after))


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
