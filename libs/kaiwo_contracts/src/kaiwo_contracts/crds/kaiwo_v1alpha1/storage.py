"""Storage of KaiwoJob and KaiwoService: volumes, the data and Hugging Face caches, and the
downloads (object storage, Git, Hugging Face) that fill them, with the secrets they read.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import KubeModel
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


class StorageSpec(KubeModel):
    """Persistent storage for the workload; ignored unless ``storageEnabled`` is true."""

    storage_enabled: Annotated[bool, NoCrdDefault] = False
    storage_class_name: str | None = None
    access_mode: PersistentVolumeAccessMode = "ReadWriteMany"
    data: DataStorageSpec | None = None
    hugging_face: HfStorageSpec | None = None

    @property
    def has_data(self) -> bool:
        """A data PVC is requested."""
        return bool(self.data is not None and self.data.storage_size)

    @property
    def has_object_storage_downloads(self) -> bool:
        return bool(
            self.has_data
            and self.data is not None
            and self.data.download is not None
            and not self.data.download.is_empty
        )

    @property
    def has_hf_downloads(self) -> bool:
        return bool(self.hugging_face is not None and self.hugging_face.pre_cache_repos)

    @property
    def has_downloads(self) -> bool:
        """A download job must run (and succeed) before the workload starts."""
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
