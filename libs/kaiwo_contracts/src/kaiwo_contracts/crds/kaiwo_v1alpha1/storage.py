"""Storage of KaiwoJob and KaiwoService: volumes, the data and Hugging Face caches, and the
downloads (object storage, Git, Hugging Face) that fill them, with the secrets they read.

A download needs the volume it fills: with ``storageEnabled``, ``data.download`` needs
``data.storageSize`` and ``huggingFace.preCacheRepos`` needs ``huggingFace.storageSize``
(decision 0111). The API server refuses an object without (a CEL rule naming the field), and
the models do too, so an object stored before the rule gets ``Valid=False`` from the planner
instead of starting without its data. Upstream dropped such a data download silently and
created an HF volume of no size.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import KubeModel
from kaiwo_contracts.crds.cel_rules import (
    CEL_VALIDATIONS,
    CelRule,
    raise_broken_rules,
    raise_violations,
)
from kaiwo_contracts.crds.core_v1 import PersistentVolumeAccessMode
from kaiwo_contracts.crds.quantity import QuantityString
from kaiwo_contracts.crds.structural import NoCrdDefault

SECRETS_ROOT = "/app/secrets"
"""Where the download Job mounts each Secret a download reads, a directory per Secret
(``<root>/<secretName>/<secretKey>``, upstream's path)."""
DOWNLOAD_CONFIG_ROOT = "/config"
"""Where the download Job mounts its configuration."""
_DOWNLOAD_JOBS_OWN = (SECRETS_ROOT, DOWNLOAD_CONFIG_ROOT)


MAX_PATH_LENGTH = 4096
"""Linux's PATH_MAX: bounds the strings the CEL rules compare (the API server refuses a rule
whose estimated cost is unbounded), and no path a container can mount is longer."""

MAX_SECRET_VOLUMES = 256
"""Bounds ``secretVolumes`` for the same reason; a pod mounting more is not one Kaiwo makes."""


def secret_file(secret_name: str, secret_key: str) -> str:
    """Where the download Job reads a Secret's key when its reference gives no ``file``."""
    return f"{SECRETS_ROOT}/{secret_name}/{secret_key}"


_ABSOLUTE_FILE: CelRule[ValueReference] = CelRule(
    rule="!has(self.file) || self.file == '' || self.file.startsWith('/')",
    message=(
        "file is where the download Job's container reads the Secret's value: an absolute "
        "path (e.g. /etc/credentials/key), or unset for /app/secrets/<secretName>/<secretKey>"
    ),
    field="file",
    holds=lambda reference: not reference.file or reference.file.startswith("/"),
    reported_at_field=True,
)


class ValueReference(KubeModel):
    """A value kept in a Secret (credentials for download tasks).

    The download Job mounts the key at ``file`` when one is given (the downloader reads it
    there), and at :func:`secret_file` otherwise. A given ``file`` is an absolute path, not
    within the directories the download Job mounts itself (:data:`SECRETS_ROOT`,
    :data:`DOWNLOAD_CONFIG_ROOT`) other than as its own default path."""

    model_config = ConfigDict(json_schema_extra={CEL_VALIDATIONS: [_ABSOLUTE_FILE.schema_entry()]})

    file: str | None = Field(
        default=None,
        description=(
            "Path in the download job's container where the value is mounted as a file; "
            "/app/secrets/<secretName>/<secretKey> if unset."
        ),
    )
    secret_name: str | None = Field(default=None, description="Name of the Secret.")
    secret_key: str | None = Field(default=None, description="Key within the Secret.")

    @model_validator(mode="after")
    def _secret_name_and_key_together(self) -> Self:
        if bool(self.secret_name) != bool(self.secret_key):
            raise PydanticCustomError(
                "secret_reference",
                "secretName and secretKey must be given together (the Secret and its key)",
            )
        return self

    @model_validator(mode="after")
    def _file_where_it_can_be_mounted(self) -> Self:
        if not _ABSOLUTE_FILE.holds(self):
            raise_violations("ValueReference", [("file", _ABSOLUTE_FILE.message, self.file)])
        if self.file and self.file != self.default_file and _within(self.file, _DOWNLOAD_JOBS_OWN):
            message = (
                f"file {self.file} is within {' or '.join(_DOWNLOAD_JOBS_OWN)}, which the "
                "download Job mounts itself: give a path outside them, or leave file unset"
            )
            raise_violations("ValueReference", [("file", message, self.file)])
        return self

    @property
    def default_file(self) -> str | None:
        """Where the key is mounted when no ``file`` is given (None without a Secret)."""
        if not (self.secret_name and self.secret_key):
            return None
        return secret_file(self.secret_name, self.secret_key)

    @property
    def mounted_file(self) -> str | None:
        """Where the download Job mounts the key and the downloader reads it."""
        return self.file or self.default_file


def _within(path: str, directories: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(f"{root}/") for root in directories)


class CloudDownloadFile(KubeModel):
    """One object to download from a bucket."""

    path: str = Field(min_length=1, description="Object key within the bucket.")
    target_path: str = Field(description="Destination, relative to the data mount path.")


class CloudDownloadFolder(KubeModel):
    """A prefix (folder) to download from a bucket."""

    path: str = Field(min_length=1, description="Prefix within the bucket.")
    target_path: str = Field(description="Destination, relative to the data mount path.")
    glob: str | None = Field(default=None, description="Only objects matching this glob.")


class CloudDownloadBucket(KubeModel):
    """A bucket (S3, GCS) or container (Azure) and what to download from it."""

    name: str = Field(min_length=1, description="Name of the bucket or container.")
    files: list[CloudDownloadFile] | None = None
    folders: list[CloudDownloadFolder] | None = None


class S3DownloadItem(KubeModel):
    """Downloads from an S3-compatible object store."""

    endpoint_url: str = Field(min_length=1, description="S3 API endpoint URL.")
    access_key_id: ValueReference | None = Field(
        default=None, description="Secret holding the access key id."
    )
    secret_key: ValueReference | None = Field(
        default=None, description="Secret holding the secret access key."
    )
    buckets: list[CloudDownloadBucket]


class GCSDownloadItem(KubeModel):
    """Downloads from Google Cloud Storage."""

    application_credentials: ValueReference = Field(
        description="Secret holding the service account key JSON."
    )
    buckets: list[CloudDownloadBucket]


class AzureBlobStorageDownloadItem(KubeModel):
    """Downloads from Azure Blob Storage."""

    connection_string: ValueReference = Field(
        description="Secret holding the storage connection string."
    )
    containers: list[CloudDownloadBucket]


class GitDownloadItem(KubeModel):
    """Clones a Git repository (or part of it) into the data volume.

    ``branch`` takes precedence over ``commit`` when both are given.
    """

    repository: str = Field(min_length=1, description="Repository URL.")
    branch: str | None = None
    commit: str | None = None
    username: ValueReference | None = None
    token: ValueReference | None = None
    path: str | None = Field(default=None, description="Sub-path to copy; whole repo if unset.")
    target_path: str = Field(description="Destination, relative to the data mount path.")


class HuggingFaceDownloadItem(KubeModel):
    """A Hugging Face repository (or some of its files) to pre-cache."""

    repo_id: str = Field(min_length=1, description='Hub repository id, e.g. "org/model".')
    files: list[str] | None = Field(default=None, description="Only these files; all if unset.")


class ObjectStorageDownloadSpec(KubeModel):
    """Download tasks that fill the data volume before the workload starts."""

    s3: list[S3DownloadItem] | None = None
    gcs: list[GCSDownloadItem] | None = None
    azure_blob: list[AzureBlobStorageDownloadItem] | None = None
    git: list[GitDownloadItem] | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.s3 or self.gcs or self.azure_blob or self.git)

    @model_validator(mode="after")
    def _one_value_per_file(self) -> Self:
        """Two references that mount different values at one file would hand the downloader
        one of them for both (or the API server would refuse the Job's two mounts there)."""
        mounted: dict[str, ValueReference] = {}
        violations: list[tuple[str, str, object]] = []
        for field, reference in self.secret_references():
            file = reference.mounted_file
            if file is None or reference.default_file is None:
                continue  # no Secret: nothing is mounted
            first = mounted.setdefault(file, reference)
            if (first.secret_name, first.secret_key) != (
                reference.secret_name,
                reference.secret_key,
            ):
                message = (
                    f"file {file} is where key {first.secret_key} of Secret "
                    f"{first.secret_name} is mounted already: each file holds one value"
                )
                violations.append((f"{field}.file", message, reference.file))
        raise_violations("ObjectStorageDownloadSpec", violations)
        return self

    def secret_references(self) -> list[tuple[str, ValueReference]]:
        """Every Secret reference of the downloads, with its wire path (``s3.0.secretKey``)."""
        found: list[tuple[str, ValueReference]] = []
        for kind, items, fields in (
            ("s3", self.s3, ("access_key_id", "secret_key")),
            ("gcs", self.gcs, ("application_credentials",)),
            ("azureBlob", self.azure_blob, ("connection_string",)),
            ("git", self.git, ("username", "token")),
        ):
            for index, item in enumerate(items or ()):
                for name in fields:
                    reference = getattr(item, name)
                    if reference is not None:
                        found.append((f"{kind}.{index}.{to_camel(name)}", reference))
        return found


class DataStorageSpec(KubeModel):
    """The data volume: a PVC (created when ``storageSize`` is set) and optional downloads."""

    # No CRD default: the API server would fill it in before the planner saw the object, and
    # KaiwoConfig.spec.storage.defaultDataMountPath could never apply (decision 0044).
    mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/workload",
        max_length=MAX_PATH_LENGTH,
        description="Mount path in the containers; KaiwoConfig's defaultDataMountPath if unset.",
    )
    storage_size: QuantityString | None = Field(default=None, description='PVC size, e.g. "100Gi".')
    download: ObjectStorageDownloadSpec | None = None


class HfStorageSpec(KubeModel):
    """The Hugging Face cache volume; its mount path is also exported as ``HF_HOME``."""

    # No CRD default, as for the data volume: KaiwoConfig's defaultHfMountPath applies.
    mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/hf_cache",
        max_length=MAX_PATH_LENGTH,
        description="Mount path, also HF_HOME; KaiwoConfig's defaultHfMountPath if unset.",
    )
    storage_size: QuantityString | None = Field(default=None, description='PVC size, e.g. "50Gi".')
    pre_cache_repos: list[HuggingFaceDownloadItem] | None = None


DOWNLOAD_KINDS = ("s3", "gcs", "azureBlob", "git")
"""The wire names of ``data.download``'s lists."""

_ENABLED = "(has(self.storageEnabled) && self.storageEnabled)"
_DATA_DOWNLOADS = " || ".join(
    f"(has(self.data.download.{kind}) && size(self.data.download.{kind}) > 0)"
    for kind in DOWNLOAD_KINDS
)
_DOWNLOAD_JOBS_OWN_MOUNT = f"^({DOWNLOAD_CONFIG_ROOT}|{SECRETS_ROOT}(/.*)?)/*$"
""":func:`download_jobs_own_mount` as a regular expression for CEL's ``matches``."""


def download_jobs_own_mount(path: str) -> bool:
    """Where the download Job mounts its own files: its configuration at ``/config``, the
    Secrets it reads at or under ``/app/secrets`` (a trailing ``/`` is the same path)."""
    trimmed = path.rstrip("/")
    return trimmed in (DOWNLOAD_CONFIG_ROOT, SECRETS_ROOT) or trimmed.startswith(f"{SECRETS_ROOT}/")


def _filled_at_the_download_jobs_own(
    volume: DataStorageSpec | HfStorageSpec | None, downloaded_into: bool
) -> bool:
    """A volume the download Job fills, at a *given* path it mounts its own files at (a
    path left to KaiwoConfig's default is the planner's to check, decision 0254)."""
    return bool(
        downloaded_into
        and volume is not None
        and "mount_path" in volume.model_fields_set
        and download_jobs_own_mount(volume.mount_path)
    )


_DOWNLOAD_JOBS_OWN_TOLD = (
    f"the download Job mounts its configuration at {DOWNLOAD_CONFIG_ROOT} and the Secrets it "
    f"reads under {SECRETS_ROOT}, so the API server would refuse the Job"
)

_STORAGE_RULES: tuple[CelRule[StorageSpec], ...] = (
    CelRule(
        rule=(
            f"!{_ENABLED} || !has(self.data) || has(self.data.storageSize) || "
            f"!has(self.data.download) || !({_DATA_DOWNLOADS})"
        ),
        message=(
            "storageSize is required when data.download is given: the download Job fills a "
            "volume of that size before the workload starts (e.g. storageSize: 100Gi)"
        ),
        field="data.storageSize",
        holds=lambda storage: not storage.data_downloads_without_a_size,
        reported_at_field=True,
    ),
    CelRule(
        rule=(
            f"!{_ENABLED} || !has(self.huggingFace) || has(self.huggingFace.storageSize) || "
            "!has(self.huggingFace.preCacheRepos) || size(self.huggingFace.preCacheRepos) == 0"
        ),
        message=(
            "storageSize is required when huggingFace.preCacheRepos is given: the download Job "
            "fills a volume of that size before the workload starts (e.g. storageSize: 50Gi)"
        ),
        field="huggingFace.storageSize",
        holds=lambda storage: not storage.hf_downloads_without_a_size,
        reported_at_field=True,
    ),
    CelRule(
        rule=(
            f"!{_ENABLED} || !has(self.data) || !has(self.huggingFace) || "
            "!has(self.data.storageSize) || self.data.storageSize == '' || "
            "!has(self.huggingFace.storageSize) || self.huggingFace.storageSize == '' || "
            "!has(self.data.mountPath) || !has(self.huggingFace.mountPath) || "
            "self.data.mountPath != self.huggingFace.mountPath"
        ),
        message=(
            "huggingFace.mountPath must differ from data.mountPath: a container mounts one "
            "volume at a path, so the data volume would not be mounted (e.g. data at /workload, "
            "the Hugging Face cache at /hf_cache)"
        ),
        field="huggingFace.mountPath",
        holds=lambda storage: not storage.volumes_share_a_mount_path,
        reported_at_field=True,
    ),
    # Refused at admission what the planner refused as an invalid spec (decision 0262).
    CelRule(
        rule=(
            f"!{_ENABLED} || !has(self.data) || !has(self.data.mountPath) || "
            "!has(self.data.storageSize) || self.data.storageSize == '' || "
            f"!has(self.data.download) || !({_DATA_DOWNLOADS}) || "
            f"!self.data.mountPath.matches('{_DOWNLOAD_JOBS_OWN_MOUNT}')"
        ),
        message=(
            f"data.mountPath must not be {DOWNLOAD_CONFIG_ROOT}, {SECRETS_ROOT} or under it "
            f"when data.download is given: {_DOWNLOAD_JOBS_OWN_TOLD} (e.g. /workload)"
        ),
        field="data.mountPath",
        holds=lambda storage: (
            not _filled_at_the_download_jobs_own(storage.data, storage.has_object_storage_downloads)
        ),
        reported_at_field=True,
    ),
    CelRule(
        rule=(
            f"!{_ENABLED} || !has(self.huggingFace) || !has(self.huggingFace.mountPath) || "
            "!has(self.huggingFace.storageSize) || self.huggingFace.storageSize == '' || "
            "!has(self.huggingFace.preCacheRepos) || size(self.huggingFace.preCacheRepos) == 0 "
            f"|| !self.huggingFace.mountPath.matches('{_DOWNLOAD_JOBS_OWN_MOUNT}')"
        ),
        message=(
            f"huggingFace.mountPath must not be {DOWNLOAD_CONFIG_ROOT}, {SECRETS_ROOT} or under "
            f"it when huggingFace.preCacheRepos is given: {_DOWNLOAD_JOBS_OWN_TOLD} "
            "(e.g. /hf_cache)"
        ),
        field="huggingFace.mountPath",
        holds=lambda storage: (
            not _filled_at_the_download_jobs_own(storage.hugging_face, storage.has_hf_downloads)
        ),
        reported_at_field=True,
    ),
)


class StorageSpec(KubeModel):
    """Persistent storage for the workload; ignored unless ``storageEnabled`` is true."""

    model_config = ConfigDict(
        json_schema_extra={CEL_VALIDATIONS: [rule.schema_entry() for rule in _STORAGE_RULES]}
    )

    storage_enabled: Annotated[bool, NoCrdDefault] = False
    storage_class_name: str | None = None
    access_mode: PersistentVolumeAccessMode = "ReadWriteMany"
    data: DataStorageSpec | None = None
    hugging_face: HfStorageSpec | None = None

    @model_validator(mode="after")
    def _downloads_have_a_volume(self) -> Self:
        raise_broken_rules("StorageSpec", _STORAGE_RULES, self)
        return self

    @property
    def has_data(self) -> bool:
        """A data PVC is requested."""
        return bool(self.data is not None and self.data.storage_size)

    @property
    def has_hf(self) -> bool:
        """A Hugging Face cache PVC is sized."""
        return bool(self.hugging_face is not None and self.hugging_face.storage_size)

    @property
    def _asks_for_data_downloads(self) -> bool:
        return bool(
            self.data is not None
            and self.data.download is not None
            and not self.data.download.is_empty
        )

    @property
    def _asks_for_hf_downloads(self) -> bool:
        return bool(self.hugging_face is not None and self.hugging_face.pre_cache_repos)

    @property
    def data_downloads_without_a_size(self) -> bool:
        """Enabled, with ``data.download`` but no ``data.storageSize`` (refused)."""
        return self.storage_enabled and self._asks_for_data_downloads and not self.has_data

    @property
    def hf_downloads_without_a_size(self) -> bool:
        """Enabled, with ``huggingFace.preCacheRepos`` but no ``storageSize`` (refused)."""
        return self.storage_enabled and self._asks_for_hf_downloads and not self.has_hf

    @property
    def volumes_share_a_mount_path(self) -> bool:
        """Enabled, both volumes sized, and both given the same ``mountPath`` (refused): the
        pods would mount only the Hugging Face cache there and the download Job's two mounts
        at one path are refused by the API server (decision 0248). A path left unset takes
        KaiwoConfig's default, which the API server cannot see, so only given paths count."""
        data, hf = self.data, self.hugging_face
        return bool(
            self.storage_enabled
            and self.has_data
            and self.has_hf
            and data is not None
            and hf is not None
            and "mount_path" in data.model_fields_set
            and "mount_path" in hf.model_fields_set
            and data.mount_path == hf.mount_path
        )

    @property
    def has_object_storage_downloads(self) -> bool:
        """The download Job fills the data volume."""
        return self.has_data and self._asks_for_data_downloads

    @property
    def has_hf_downloads(self) -> bool:
        """The download Job fills the Hugging Face cache volume."""
        return self.has_hf and self._asks_for_hf_downloads

    @property
    def has_downloads(self) -> bool:
        """A download job must run (and succeed) before the workload starts (the planner's
        rule too: ``downloads_configured``, ``StorageInputs``)."""
        return self.has_object_storage_downloads or self.has_hf_downloads


class DownloadTaskConfig(KubeModel):
    """What the download job is told to fetch (its configuration file, not part of a CRD)."""

    download_root: str
    hf_home: str
    s3: list[S3DownloadItem] | None = None
    gcs: list[GCSDownloadItem] | None = None
    hf: list[HuggingFaceDownloadItem] | None = None
    azure_blob: list[AzureBlobStorageDownloadItem] | None = None
    git: list[GitDownloadItem] | None = None


class SecretVolume(KubeModel):
    """Mounts a Secret (or one of its keys) as files into the workload's containers."""

    name: str = Field(
        min_length=1, max_length=MAX_PATH_LENGTH, description="Volume name, unique within the pod."
    )
    secret_name: str = Field(min_length=1, description="The Secret to mount.")
    key: str | None = Field(default=None, description="Only this key; whole Secret if unset.")
    sub_path: str | None = Field(default=None, description="File name of the key's content.")
    mount_path: str = Field(
        min_length=1, max_length=MAX_PATH_LENGTH, description="Directory in the container."
    )


def _cel_secret_volume_spares(volume: str, name: str) -> str:
    """CEL: secret volume ``v`` neither takes the name nor the given path of the sized
    storage volume ``volume`` (``data`` or ``huggingFace``), whose pod volume is ``name``."""
    spec = f"self.storage.{volume}"
    return (
        f"(!has({spec}) || !has({spec}.storageSize) || {spec}.storageSize == '' || "
        f"(v.name != '{name}' && (!has({spec}.mountPath) || v.mountPath != {spec}.mountPath)))"
    )


def secret_volumes_replacing_storage(
    secret_volumes: list[SecretVolume] | None, storage: StorageSpec | None
) -> list[SecretVolume]:
    """The ``secretVolumes`` entries that would replace a storage volume in the pods: named
    like its pod volume (volumes are merged by name) or mounted at its given ``mountPath``
    (mounts are merged by path), so the claim would silently not be mounted. As in
    ``volumes_share_a_mount_path``, only a given path counts: the API server cannot see
    KaiwoConfig's defaults (the planner checks those, ``storage_mount_clashes``)."""
    if not secret_volumes or storage is None or not storage.storage_enabled:
        return []
    taken: list[tuple[str, str | None]] = []
    if storage.has_data and storage.data is not None:
        given = storage.data.mount_path if "mount_path" in storage.data.model_fields_set else None
        taken.append(("data", given))
    if storage.has_hf and storage.hugging_face is not None:
        hf = storage.hugging_face
        taken.append(("hf", hf.mount_path if "mount_path" in hf.model_fields_set else None))
    return [
        secret
        for secret in secret_volumes
        if any(secret.name == name or secret.mount_path == path for name, path in taken)
    ]


SECRET_VOLUMES_SPARE_STORAGE_RULE: CelRule[Any] = CelRule(
    rule=(
        "!has(self.secretVolumes) || !has(self.storage) || !has(self.storage.storageEnabled) || "
        "!self.storage.storageEnabled || "
        "self.secretVolumes.all(v, "
        f"{_cel_secret_volume_spares('data', 'data')} && "
        f"{_cel_secret_volume_spares('huggingFace', 'hf')})"
    ),
    message=(
        "secretVolumes must not be named data or hf nor mounted at data.mountPath or "
        "huggingFace.mountPath: a pod's volumes are merged by name and its mounts by path, so "
        "the storage volume would not be mounted (e.g. name the entry api-key and mount it at "
        "/etc/secrets/api-key)"
    ),
    field="secretVolumes",
    holds=lambda spec: not secret_volumes_replacing_storage(spec.secret_volumes, spec.storage),
    reported_at_field=True,
)
"""Sits on ``CommonMetaSpec`` (it sees both ``secretVolumes`` and ``storage``)."""
