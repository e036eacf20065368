"""Credentials for a Model's source, always by reference to Secrets in its namespace.

Per URL scheme, as upstream: ``hf://`` gets ``HF_TOKEN``; ``s3://`` the AWS key pair;
``gs://`` a key file mounted at ``/secrets/gcp-credentials/credentials.json`` with
``GOOGLE_APPLICATION_CREDENTIALS`` naming it; ``oss://`` the Alibaba key pair. ``pvc://``
mounts the claim at ``/model``. The Secret comes from the AIMNamespaceConfig of the Model's
namespace when it names one (Hugging Face token; the S3 credential of the endpoint in
``spec.env.AWS_ENDPOINT_URL``, chosen as for a download item,
:func:`~kaiwo_planner.domain.settings.namespace_config.s3_credential_for`; the first GCS
one), else
from the system configuration's ``secretNames``, marked optional so that a missing Secret
does not stop a Pod. A variable the Model's ``env`` sets itself is left to it (upstream adds
both, and which one wins is then up to the kubelet).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_contracts.models_config import SecretNames

from kaiwo_planner.domain.models.sources import ModelSource
from kaiwo_planner.domain.settings.namespace_config import (
    NamespaceSettings,
    SecretKeyRef,
    s3_credential_for,
)

GCP_CREDENTIALS_DIR: Final = "/secrets/gcp-credentials"
GCP_CREDENTIALS_FILE: Final = "credentials.json"
GCP_VOLUME: Final = "gcp-credentials"
PVC_VOLUME: Final = "model"
PVC_MOUNT: Final = "/model"
AWS_ENDPOINT_ENV: Final = "AWS_ENDPOINT_URL"


@dataclass(frozen=True, slots=True)
class SourceAdditions:
    """Environment variables, volumes and mounts a source adds to a container."""

    env: tuple[Mapping[str, Any], ...] = ()
    volumes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()

    def __add__(self, other: SourceAdditions) -> SourceAdditions:
        return SourceAdditions(
            env=self.env + other.env,
            volumes=self.volumes + other.volumes,
            mounts=self.mounts + other.mounts,
        )


def source_additions(
    source: ModelSource,
    *,
    secrets: SecretNames,
    namespace: NamespaceSettings,
    user_env: Mapping[str, str],
) -> SourceAdditions:
    """What reading from ``source`` needs in a container (see the module docstring)."""
    if source.scheme == "pvc":
        mount = {"name": PVC_VOLUME, "mountPath": PVC_MOUNT}
        if source.path.lstrip("/"):
            mount["subPath"] = source.path.lstrip("/")
        volume = {"name": PVC_VOLUME, "persistentVolumeClaim": {"claimName": source.name}}
        return SourceAdditions(volumes=(volume,), mounts=(mount,))
    return credentials_for(source.scheme, secrets=secrets, namespace=namespace, user_env=user_env)


def credentials_for(
    scheme: str,
    *,
    secrets: SecretNames,
    namespace: NamespaceSettings,
    user_env: Mapping[str, str],
) -> SourceAdditions:
    """The credentials of one object-store scheme (nothing for the others)."""
    found: SourceAdditions
    match scheme:
        case "hf":
            found = _hugging_face(secrets, namespace)
        case "s3":
            found = _aws(secrets, namespace, endpoint=user_env.get(AWS_ENDPOINT_ENV, ""))
        case "gs":
            found = _gcp(secrets, namespace)
        case "oss":
            found = SourceAdditions(
                env=(
                    _secret_env("OSS_ACCESS_KEY_ID", secrets.alibaba, "accessKeyID"),
                    _secret_env("OSS_ACCESS_KEY_SECRET", secrets.alibaba, "accessKeySecret"),
                )
            )
        case _:
            return SourceAdditions()
    return SourceAdditions(
        env=tuple(v for v in found.env if v["name"] not in user_env),
        volumes=found.volumes,
        mounts=found.mounts,
    )


def every_credential(
    *, secrets: SecretNames, namespace: NamespaceSettings, user_env: Mapping[str, str]
) -> SourceAdditions:
    """The credentials of every object store (an adapter may come from any of them)."""
    total = SourceAdditions()
    for scheme in ("hf", "gs", "oss", "s3"):
        total += credentials_for(scheme, secrets=secrets, namespace=namespace, user_env=user_env)
    return total


def _hugging_face(secrets: SecretNames, namespace: NamespaceSettings) -> SourceAdditions:
    token = namespace.hugging_face_token
    if token is not None:
        return SourceAdditions(env=(_ref_env("HF_TOKEN", token),))
    return SourceAdditions(env=(_secret_env("HF_TOKEN", secrets.huggingface, "token"),))


def _aws(secrets: SecretNames, namespace: NamespaceSettings, *, endpoint: str) -> SourceAdditions:
    credential = s3_credential_for(endpoint, namespace.s3)
    if credential is not None:
        return SourceAdditions(
            env=tuple(
                _ref_env(name, ref)
                for name, ref in (
                    ("AWS_ACCESS_KEY_ID", credential.access_key_id),
                    ("AWS_SECRET_ACCESS_KEY", credential.secret_key),
                )
                if ref is not None
            )
        )
    return SourceAdditions(
        env=(
            _secret_env("AWS_ACCESS_KEY_ID", secrets.aws, "accessKeyID"),
            _secret_env("AWS_SECRET_ACCESS_KEY", secrets.aws, "secretAccessKey"),
        )
    )


def _gcp(secrets: SecretNames, namespace: NamespaceSettings) -> SourceAdditions:
    if namespace.gcs:
        secret_name, key = namespace.gcs[0].secret_name, namespace.gcs[0].secret_key
    else:
        secret_name, key = secrets.gcp, "jsonKeyfile"
    volume = {
        "name": GCP_VOLUME,
        "secret": {
            "secretName": secret_name,
            "items": [{"key": key, "path": GCP_CREDENTIALS_FILE}],
            "optional": True,
        },
    }
    return SourceAdditions(
        env=(
            {
                "name": "GOOGLE_APPLICATION_CREDENTIALS",
                "value": f"{GCP_CREDENTIALS_DIR}/{GCP_CREDENTIALS_FILE}",
            },
        ),
        volumes=(volume,),
        mounts=({"name": GCP_VOLUME, "mountPath": GCP_CREDENTIALS_DIR, "readOnly": True},),
    )


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {
        "name": name,
        "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": True}},
    }


def _ref_env(name: str, ref: SecretKeyRef) -> dict[str, Any]:
    return _secret_env(name, ref.secret_name, ref.secret_key)


def sorted_env(env: Mapping[str, str] | None) -> tuple[dict[str, str], ...]:
    """``spec.env`` as variables sorted by name, as upstream writes them."""
    return tuple({"name": key, "value": (env or {})[key]} for key in sorted(env or {}))


def unique_volumes(volumes: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """Volumes without a second one of the same name (credentials asked for twice)."""
    seen: dict[str, Mapping[str, Any]] = {}
    for volume in volumes:
        seen.setdefault(str(volume.get("name")), volume)
    return tuple(seen.values())
