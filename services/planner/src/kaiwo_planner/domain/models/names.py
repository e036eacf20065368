"""Names and labels of what a Model owns, as upstream KubeAI names them (its tools rely on
them: ``model=<name>`` on server Pods, ``load-cache-<name>``, ``shared-model-cache-<profile>``).
"""

from __future__ import annotations

from typing import Final

LABEL_MODEL: Final = "model"
LABEL_POD_HASH: Final = "pod-hash"
LABEL_APP: Final = "app"
LABEL_APP_NAME: Final = "app.kubernetes.io/name"
LABEL_APP_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_CACHE_PROFILE: Final = "kaiwo.silogen.ai/cache-profile"
ADAPTER_LABEL_PREFIX: Final = "adapter.kubeai.org/"
ANNOTATION_POD_PORT: Final = "model-pod-port"
APP_MODEL: Final = "model"
SERVER_CONTAINER: Final = "server"
SERVER_PORT: Final = 8000


def pod_name(model: str, pod_hash: str, slot: int) -> str:
    """``model-<model>-<hash>-<slot>``: the same slot of the same spec is the same Pod, so a
    plan made again before the first one's Pods are observed asks for the very same Pods."""
    return f"model-{model}-{pod_hash}-{slot}"


def files_config_map(model: str) -> str:
    return f"model-{model}-files"


def adapters_config_map(model: str) -> str:
    return f"model-{model}-adapters"


def adapter_loader_role(model: str) -> str:
    return f"model-{model}-adapter-loader"


def cache_volume(profile: str) -> str:
    return f"shared-model-cache-{profile}"


def load_job(model: str) -> str:
    return f"load-cache-{model}"


def evict_job(model: str) -> str:
    return f"evict-cache-{model}"


def cache_directory(model: str, uid: str) -> str:
    """The Model's directory in its cache volume: a Model made again under the same name
    loads afresh."""
    return f"models/{model}-{uid}"


def engine_label(engine: str) -> str:
    """``app.kubernetes.io/name`` of a server Pod: the engine in lower case (``vllm``)."""
    return engine.lower()
