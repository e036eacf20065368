"""The Kubernetes port of the operator and its kubernetes_asyncio adapter.

Services depend on :class:`KubernetesPort` (``kaiwo_kube.port``), or on the one of its protocols
they need (:class:`ObjectReader`, :class:`ObjectWriter`, ...), and the resource catalogue
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
from kaiwo_kube.port import (
    CrdInstaller,
    EventRecorder,
    KubernetesPort,
    ObjectList,
    ObjectReader,
    ObjectWriter,
    PropagationPolicy,
    Scaler,
    StatusWriter,
    WatchEvent,
)
from kaiwo_kube.resources import ResourceType, known_type

__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Conflict",
    "CrdInstaller",
    "EventRecorder",
    "Invalid",
    "KubeError",
    "KubernetesPort",
    "MalformedResponse",
    "NotFound",
    "ObjectList",
    "ObjectReader",
    "ObjectWriter",
    "PropagationPolicy",
    "ResourceExpired",
    "ResourceType",
    "Retryable",
    "Scaler",
    "StatusWriter",
    "WatchEvent",
    "known_type",
]
