"""The Kubernetes port of the operator and its kubernetes_asyncio adapter.

Each service declares the Protocol of the calls it makes in its own ``cluster_port`` module
(the watcher takes :class:`ObjectReader`); :class:`KubernetesPort` (``kaiwo_kube.port``) is
the whole of what the adapter offers. Services use the resource catalogue
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
    EventType,
    JsonPatcher,
    KubernetesPort,
    MergePatcher,
    ObjectApplier,
    ObjectCreator,
    ObjectDeleter,
    ObjectGetter,
    ObjectList,
    ObjectLister,
    ObjectReader,
    ObjectReplacer,
    ObjectWatcher,
    ObjectWriter,
    PropagationPolicy,
    ScalePatcher,
    Scaler,
    ScaleReader,
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
    "EventType",
    "Invalid",
    "JsonPatcher",
    "KubeError",
    "KubernetesPort",
    "MalformedResponse",
    "MergePatcher",
    "NotFound",
    "ObjectApplier",
    "ObjectCreator",
    "ObjectDeleter",
    "ObjectGetter",
    "ObjectList",
    "ObjectLister",
    "ObjectReader",
    "ObjectReplacer",
    "ObjectWatcher",
    "ObjectWriter",
    "PropagationPolicy",
    "ResourceExpired",
    "ResourceType",
    "Retryable",
    "ScalePatcher",
    "ScaleReader",
    "Scaler",
    "StatusWriter",
    "WatchEvent",
    "known_type",
]
