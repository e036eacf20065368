"""Mount paths of a workload's storage that cannot work, with KaiwoConfig's defaults applied.

The CRDs refuse what the API server can see (decisions 0248, 0254): both volumes, or a
secret volume and a volume, at one *given* path. A path left unset takes KaiwoConfig's
default (decision 0044), which no CEL rule sees, so a clash through a default reached the
pods: merged by path, the data volume was mounted nowhere, without a word. And a volume the
download Job fills, mounted at ``/config`` or under ``/app/secrets`` (the Job's own mounts),
made the API server refuse the Job on every plan (``ApplyRefused``, naming the Job's field),
the workload DOWNLOADING for good. The planner tells both as an invalid spec naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import CommonMetaSpec
from kaiwo_contracts.crds.kaiwo_v1alpha1.storage import DOWNLOAD_CONFIG_ROOT, SECRETS_ROOT
from kaiwo_contracts.validation import Problem


@dataclass(frozen=True, slots=True)
class _Volume:
    field: str
    """Wire path of its ``mountPath``."""
    pod_volume: str
    path: str
    given: bool
    """The spec gives the path (else KaiwoConfig's default, named by ``default_setting``)."""
    default_setting: str
    downloaded_into: bool

    def told(self) -> str:
        return self.path if self.given else f"{self.path}, KaiwoConfig's {self.default_setting}"


def storage_mount_problems(
    spec: CommonMetaSpec, *, default_data_mount_path: str, default_hf_mount_path: str
) -> list[Problem]:
    """What stops ``spec``'s volumes from being mounted as it asks (see the module docstring).
    Clashes between given paths only are left to the models (their own message)."""
    storage = spec.storage
    if storage is None or not storage.storage_enabled:
        return []
    volumes: list[_Volume] = []
    if storage.has_data and storage.data is not None:
        given = "mount_path" in storage.data.model_fields_set
        volumes.append(
            _Volume(
                field="spec.storage.data.mountPath",
                pod_volume="data",
                path=storage.data.mount_path if given else default_data_mount_path,
                given=given,
                default_setting="defaultDataMountPath",
                downloaded_into=storage.has_object_storage_downloads,
            )
        )
    if storage.has_hf and storage.hugging_face is not None:
        given = "mount_path" in storage.hugging_face.model_fields_set
        volumes.append(
            _Volume(
                field="spec.storage.huggingFace.mountPath",
                pod_volume="hf",
                path=storage.hugging_face.mount_path if given else default_hf_mount_path,
                given=given,
                default_setting="defaultHfMountPath",
                downloaded_into=storage.has_hf_downloads,
            )
        )
    problems: list[Problem] = []
    if len(volumes) == 2 and volumes[0].path == volumes[1].path:
        data, hf = volumes
        if not (data.given and hf.given):
            # Name the path the user can still give: the one left to the default.
            at = hf if not hf.given else data
            problems.append(
                Problem(
                    at.field,
                    f"huggingFace.mountPath ({hf.told()}) must differ from data.mountPath "
                    f"({data.told()}): a container mounts one volume at a path, so the data "
                    "volume would not be mounted; give "
                    f"{at.field.removeprefix('spec.storage.')} a path of its own",
                )
            )
    problems.extend(
        Problem(
            volume.field,
            f"{volume.told()} is where the download Job mounts its own configuration "
            f"({DOWNLOAD_CONFIG_ROOT}) or the Secrets it reads (under {SECRETS_ROOT}), "
            "so the API server would refuse the Job; give the volume another mount "
            "path (e.g. /workload or /hf_cache)",
        )
        for volume in volumes
        if volume.downloaded_into and _download_jobs_own(volume.path)
    )
    problems.extend(
        Problem(
            "spec.secretVolumes",
            f"secret volume {secret.name} is mounted at {volume.told()}: a pod's "
            "mounts are merged by path, so the storage volume would not be "
            f"mounted; mount {secret.name} elsewhere or give "
            f"{volume.field.removeprefix('spec.storage.')} a path of its own",
        )
        for secret in spec.secret_volumes or ()
        for volume in volumes
        if not volume.given and secret.mount_path == volume.path
    )
    return problems


def _download_jobs_own(path: str) -> bool:
    trimmed = path.rstrip("/")
    return trimmed in (DOWNLOAD_CONFIG_ROOT, SECRETS_ROOT) or trimmed.startswith(f"{SECRETS_ROOT}/")
