"""The Kubernetes port of the operator and its kubernetes_asyncio adapter.

Services depend on :class:`KubernetesPort` (``kaiwo_kube.port``) and the resource catalogue
(``kaiwo_kube.resources``); only :mod:`kaiwo_kube.kubernetes_asyncio_adapter` imports the client
library.
"""

from kaiwo_kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Invalid,
    KubeError,
    MalformedResponse,
    NotFound,
    ResourceExpired,
    Retryable,
)
from kaiwo_kube.port import KubernetesPort, ObjectList, PropagationPolicy, WatchEvent
from kaiwo_kube.resources import ResourceType, known_type

__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Conflict",
    "Invalid",
    "KubeError",
    "KubernetesPort",
    "MalformedResponse",
    "NotFound",
    "ObjectList",
    "PropagationPolicy",
    "ResourceExpired",
    "ResourceType",
    "Retryable",
    "WatchEvent",
    "known_type",
]
