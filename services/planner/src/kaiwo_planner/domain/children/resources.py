"""Container resources: GPU resource names, defaults and their precedence.

Precedence for CPU and memory, per key and per section (requests, limits):

1. the container's own value (from a user-provided ``job``/``deployment``/Ray spec);
2. when Kaiwo generated the pod template and GPUs are requested: 4 CPUs and 32Gi per GPU,
   overriding ``spec.resources`` (the seeds say so; upstream code does the opposite);
3. ``spec.resources``;
4. the base default: 2 CPUs, 16Gi.

A limit never ends up below its request because of a default (upstream would produce a pod
the API server rejects, e.g. a container asking for 8 CPUs under the 2-CPU default limit):
where a request exceeds its limit, the value that was filled in yields to the one the user
gave: a filled-in limit rises to the request, a filled-in request falls to the limit. Between
``spec.resources`` and the base defaults, ``spec.resources`` is the one the user gave. Only
when the user gave both does the pair stay as written (and the API server says why).

GPU quantities come only from the allocation (``gpus``/``gpusPerReplica``/``gpuVendor``); GPU
keys in ``spec.resources`` are ignored, as the API reference states. A computed GPU count above
zero also replaces a GPU value in the container's own resources, so the allocation that
Kaiwo reports in ``NUM_GPUS_PER_REPLICA`` is what the pod gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.gpu_vendor_keys import GPU_KEY_BY_VENDOR

from kaiwo_planner.domain.state.nodes import parse_quantity

GPU_KEY_AMD = GPU_KEY_BY_VENDOR["amd"]
GPU_KEY_NVIDIA = GPU_KEY_BY_VENDOR["nvidia"]
BASE_CPU = "2"
BASE_MEMORY = "16Gi"
CPU_PER_GPU = 4
MEMORY_GIB_PER_GPU = 32
SECTIONS = ("limits", "requests")

Resources = dict[str, dict[str, str]]


def gpu_resource_key(vendor: str, *, default_key: str) -> str:
    """``nvidia.com/gpu`` or ``amd.com/gpu`` by vendor (any case); else the configured key."""
    match vendor.upper():
        case "NVIDIA":
            return GPU_KEY_NVIDIA
        case "AMD":
            return GPU_KEY_AMD
        case _:
            return default_key


def _quantity(value: Any) -> str:
    return str(value)


def user_resource_defaults(
    user_resources: Mapping[str, Any] | None, *, gpu_keys: frozenset[str]
) -> Resources:
    """``spec.resources`` as requests/limits of strings, without any GPU key."""
    given = user_resources or {}
    return {
        section: {
            name: _quantity(value)
            for name, value in (given.get(section) or {}).items()
            if name not in gpu_keys
        }
        for section in SECTIONS
    }


def main_container_defaults(
    *,
    user_resources: Mapping[str, Any] | None,
    gpus_per_replica: int,
    gpu_key: str,
    generated_template: bool,
    memory_override: str | None = None,
) -> Resources:
    """The defaults filled into a main container (see the module docstring for precedence).

    ``memory_override`` (the Ray head memory) replaces memory in both sections.
    """
    defaults = user_resource_defaults(
        user_resources, gpu_keys=frozenset({GPU_KEY_AMD, GPU_KEY_NVIDIA, gpu_key})
    )
    given_requests, given_limits = set(defaults["requests"]), set(defaults["limits"])
    gpu_derived = generated_template and gpus_per_replica > 0
    for section in SECTIONS:
        values = defaults[section]
        if gpu_derived:
            values["cpu"] = str(CPU_PER_GPU * gpus_per_replica)
            values["memory"] = f"{MEMORY_GIB_PER_GPU * gpus_per_replica}Gi"
        values.setdefault("cpu", BASE_CPU)
        values.setdefault("memory", BASE_MEMORY)
        if memory_override:
            values["memory"] = memory_override
        if gpus_per_replica > 0:
            values[gpu_key] = str(gpus_per_replica)
    _keep_limits_above_requests(defaults, given_requests=given_requests, given_limits=given_limits)
    return defaults


def _exceeds(request: Any, limit: Any) -> bool:
    try:
        return parse_quantity(request) > parse_quantity(limit)
    except ValueError:
        return False  # not ours to judge: the API server names the bad quantity


def _keep_limits_above_requests(
    resources: Mapping[str, Any], *, given_requests: set[str], given_limits: set[str]
) -> None:
    """Resolve request > limit in place: the value the user did not give yields (docstring)."""
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for name in requests.keys() & limits.keys():
        if not _exceeds(requests[name], limits[name]):
            continue
        if name not in given_limits:
            limits[name] = requests[name]
        elif name not in given_requests:
            requests[name] = limits[name]


def fill_resources(
    container_resources: Mapping[str, Any] | None,
    defaults: Resources,
    *,
    enforced: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The container's resources with every missing default added.

    Keys in ``enforced`` (the allocated GPU key) replace the container's own value.
    """
    result: dict[str, Any] = dict(container_resources or {})
    given = {section: set(result.get(section) or {}) - enforced for section in SECTIONS}
    for section in SECTIONS:
        own = {name: _quantity(v) for name, v in (result.get(section) or {}).items()}
        for name, value in defaults[section].items():
            if name in enforced or name not in own:
                own[name] = value
        if own:
            result[section] = own
    _keep_limits_above_requests(
        result, given_requests=given["requests"], given_limits=given["limits"]
    )
    return result
