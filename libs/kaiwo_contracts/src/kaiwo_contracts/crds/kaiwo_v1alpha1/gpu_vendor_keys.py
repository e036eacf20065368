"""Another vendor's GPU key in a pod template the user gives (decision 0161).

A KaiwoJob or KaiwoService that asks Kaiwo for GPUs (``gpus`` above 0 or ``gpusPerReplica``
given) gets them under its vendor's key: ``amd.com/gpu`` for ``gpuVendor: amd`` (the
default), ``nvidia.com/gpu`` for ``nvidia``. The API reference: GPU requests and limits "are
controlled exclusively by the gpus, gpusPerReplica, and gpuVendor fields". A pod template of
the user's (``spec.job``, ``spec.deployment``, the head and worker groups of ``spec.rayJob``'s
or ``spec.rayService``'s cluster) that names the *other* vendor's key kept it next to Kaiwo's,
as upstream does (a container's own resource wins there): the pods asked for both kinds of
GPU, which no node has and no flavor of a queue gives, so the workload waited PENDING for good
with Kueue's "insufficient quota" and nothing naming the field.

Which vendor the user meant is not Kaiwo's to guess (the template says NVIDIA, ``gpuVendor``
says AMD, and dropping either runs the pods on hardware the other names), so the spec is
refused, naming every such field, before anything is made. Not judged: a workload that asks
Kaiwo for no GPUs (its template's GPU keys are the user's, kept as written), a vendor other
than amd or nvidia (its key is the KaiwoConfig's ``defaultGpuResourceKey``, not known
offline), and a template that is not used (``spec.job`` of a Ray KaiwoJob, ``spec.deployment``
of a Ray KaiwoService).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

GPU_KEY_BY_VENDOR: Mapping[str, str] = MappingProxyType(
    {"amd": "amd.com/gpu", "nvidia": "nvidia.com/gpu"}
)
"""The resource name Kaiwo gives a workload's GPUs under, by ``gpuVendor`` (any case)."""

_VENDOR_NAME = {"amd": "AMD", "nvidia": "NVIDIA"}


def asks_kaiwo_for_gpus(fields: Mapping[str, Any]) -> bool:
    """Whether a spec's validated fields (pydantic's ``info.data``) ask Kaiwo for GPUs:
    ``gpus`` above 0 or ``gpusPerReplica`` given (at least 1)."""
    gpus = fields.get("gpus")
    return (isinstance(gpus, int) and gpus > 0) or fields.get("gpus_per_replica") is not None


def _templates(given: Mapping[str, Any], cluster_key: str | None) -> Iterator[tuple[str, Any]]:
    """(path, pod template) of the given object: its ``spec.template``, or (``cluster_key``)
    the head's and every worker group's of its Ray cluster ``spec.<cluster_key>``."""
    spec = given.get("spec")
    if not isinstance(spec, Mapping):
        return
    if cluster_key is None:
        yield "spec.template", spec.get("template")
        return
    cluster = spec.get(cluster_key)
    if not isinstance(cluster, Mapping):
        return
    head = cluster.get("headGroupSpec")
    if isinstance(head, Mapping):
        yield f"spec.{cluster_key}.headGroupSpec.template", head.get("template")
    groups = cluster.get("workerGroupSpecs")
    for index, group in enumerate(groups if isinstance(groups, list) else ()):
        if isinstance(group, Mapping):
            yield f"spec.{cluster_key}.workerGroupSpecs[{index}].template", group.get("template")


def _named(template: Any, key: str) -> Iterator[str]:
    """The paths (below the template) of each quantity under ``key`` in its containers'
    and init containers' limits and requests, with the value written."""
    pod = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(pod, Mapping):
        return
    for kind in ("initContainers", "containers"):
        containers = pod.get(kind)
        for index, container in enumerate(containers if isinstance(containers, list) else ()):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for section in ("limits", "requests"):
                quantities = resources.get(section)
                if isinstance(quantities, Mapping) and key in quantities:
                    yield (
                        f'.spec.{kind}[{index}].resources.{section}["{key}"] ({quantities[key]})'
                    )


def other_vendor_gpu_key_refusal(
    given: Any, fields: Mapping[str, Any], *, owner_kind: str, cluster_key: str | None = None
) -> tuple[str, str] | None:
    """Why ``given`` (the wire form of ``spec.job``/``spec.deployment``, or with
    ``cluster_key`` ``rayClusterSpec``/``rayClusterConfig`` of ``spec.rayJob``/
    ``spec.rayService``, read defensively) cannot run with the spec's ``fields``: an error
    kind and a message naming each quantity under the other vendor's GPU key. None when the
    spec asks Kaiwo for no GPUs, its vendor is neither amd nor nvidia, or no template names
    the other key."""
    vendor = fields.get("gpu_vendor")
    if not isinstance(given, Mapping) or not isinstance(vendor, str):
        return None
    vendor = vendor.lower()
    if vendor not in GPU_KEY_BY_VENDOR or not asks_kaiwo_for_gpus(fields):
        return None
    own = GPU_KEY_BY_VENDOR[vendor]
    [(other_vendor, other)] = [(v, k) for v, k in GPU_KEY_BY_VENDOR.items() if v != vendor]
    named = [
        f"{path}{below}"
        for path, template in _templates(given, cluster_key)
        for below in _named(template, other)
    ]
    if not named:
        return None
    other_name = _VENDOR_NAME[other_vendor]
    return (
        "other_vendor_gpu_key",
        f"{', '.join(named)} must not be given: the {owner_kind} asks Kaiwo for "
        f"{_VENDOR_NAME[vendor]} GPUs ({_asked(fields)}), which Kaiwo gives its pods under "
        f"{own}, and a pod that also asks for {other} fits no node and no flavor of a queue, "
        f"so it would wait for good; set gpuVendor: {other_vendor} to run on {other_name} "
        f"GPUs (Kaiwo then sets {other} itself), or leave {other} out of the template",
    )


def _asked(fields: Mapping[str, Any]) -> str:
    said = []
    gpus = fields.get("gpus")
    if isinstance(gpus, int) and gpus > 0:
        said.append(f"gpus {gpus}")
    if fields.get("gpus_per_replica") is not None:
        said.append(f"gpusPerReplica {fields['gpus_per_replica']}")
    vendor = fields.get("gpu_vendor")
    said.append(
        "gpuVendor amd, the default when left out" if vendor == "amd" else f"gpuVendor {vendor}"
    )
    return ", ".join(said)
