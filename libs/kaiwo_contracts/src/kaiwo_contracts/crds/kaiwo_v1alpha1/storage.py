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

from typing import Annotated, Self

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import KubeModel
from kaiwo_contracts.crds.cel_rules import CEL_VALIDATIONS, CelRule, raise_violations
from kaiwo_contracts.crds.core_v1 import PersistentVolumeAccessMode
from kaiwo_contracts.crds.quantity import QuantityString
from kaiwo_contracts.crds.structural import NoCrdDefault


class ValueReference(KubeModel):
    """A value kept in a Secret (credentials for download tasks)."""

    file: str | None = Field(
        default=None,
        description="Path where the value is mounted in the download job; set by the controller.",
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


class DataStorageSpec(KubeModel):
    """The data volume: a PVC (created when ``storageSize`` is set) and optional downloads."""

    # No CRD default: the API server would fill it in before the planner saw the object, and
    # KaiwoConfig.spec.storage.defaultDataMountPath could never apply (decision 0044).
    mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/workload",
        description="Mount path in the containers; KaiwoConfig's defaultDataMountPath if unset.",
    )
    storage_size: QuantityString | None = Field(default=None, description='PVC size, e.g. "100Gi".')
    download: ObjectStorageDownloadSpec | None = None


class HfStorageSpec(KubeModel):
    """The Hugging Face cache volume; its mount path is also exported as ``HF_HOME``."""

    # No CRD default, as for the data volume: KaiwoConfig's defaultHfMountPath applies.
    mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/hf_cache",
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
        raise_violations(
            "StorageSpec",
            [(rule.field, rule.message, None) for rule in _STORAGE_RULES if not rule.holds(self)],
        )
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

    name: str = Field(min_length=1, description="Volume name, unique within the pod.")
    secret_name: str = Field(min_length=1, description="The Secret to mount.")
    key: str | None = Field(default=None, description="Only this key; whole Secret if unset.")
    sub_path: str | None = Field(default=None, description="File name of the key's content.")
    mount_path: str = Field(min_length=1, description="Directory in the container.")
