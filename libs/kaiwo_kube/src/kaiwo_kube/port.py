"""The Kubernetes port: everything the adapter offers, one Protocol per call (``ObjectGetter``,
``ObjectLister``, ``ObjectApplier``, ``StatusWriter``, ``ScalePatcher``...), each signature
written once here; the groups the adapter's parts implement (read and watch, write, status,
scale, events, CRDs); and :class:`KubernetesPort`, all of them together.

A service does not take a group: it declares, in its own ``cluster_port`` module, the Protocol
of exactly the calls it makes, composed from the one-call protocols here (the executor's
``ExecutorCluster``, the monitor's ``ClusterReader``, the sandbox's ``SandboxCluster``, the
command's few), and the adapter satisfies it by its shape. The groups are what the one
contract suite per protocol runs against every adapter.

Objects are plain dicts in their JSON form (``apiVersion``, ``kind``, ``metadata``...). Kinds are
addressed by :class:`~kaiwo_kube.resources.ResourceType` values (see the catalogue in
:mod:`kaiwo_kube.resources`). Failures raise the typed errors of :mod:`kaiwo_kube.errors`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol

from kaiwo_kube.resources import ResourceType

PropagationPolicy = Literal["Background", "Foreground", "Orphan"]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
EventType = Literal["Normal", "Warning"]


class ObjectList(NamedTuple):
    """A list answer: the items and the resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str


class WatchEvent(NamedTuple):
    """One watch event. A BOOKMARK's object carries only ``metadata.resourceVersion``."""

    type: WatchEventType
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        metadata = self.object.get("metadata")
        version = metadata.get("resourceVersion", "") if isinstance(metadata, dict) else ""
        return str(version) if isinstance(version, str | int) else ""


class ObjectGetter(Protocol):
    """Read one object."""

    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """The object; :class:`~kaiwo_kube.errors.NotFound` when absent."""
        ...


class ObjectLister(Protocol):
    """List objects."""

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """Every matching object (all pages) and the list's resourceVersion.

        ``namespace=None`` lists a namespaced type across all namespaces.
        """
        ...


class ObjectWatcher(Protocol):
    """Watch objects."""

    def watch(
        self,
        resource: ResourceType,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        bookmarks: bool = True,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after ``resource_version`` until the server ends the watch.

        Raises :class:`~kaiwo_kube.errors.ResourceExpired` when that version is too old: list
        again and watch from the new list's version. A caller that stops early closes the
        stream with ``contextlib.aclosing``.
        """
        ...


class ObjectReader(ObjectGetter, ObjectLister, ObjectWatcher, Protocol):
    """Read and watch objects (the watcher)."""


class ObjectCreator(Protocol):
    """Create an object."""

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        """Create; :class:`~kaiwo_kube.errors.AlreadyExists` when the name is taken."""
        ...


class ObjectReplacer(Protocol):
    """Replace an object."""

    async def replace(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        """Replace (PUT); a stale ``metadata.resourceVersion`` raises Conflict."""
        ...


class ObjectApplier(Protocol):
    """Server-side apply an object."""

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        resource: ResourceType | None = None,
        if_absent: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply of ``obj`` (created when absent). Without ``force`` a field owned
        by another manager with a different value raises Conflict. With ``if_absent`` it only
        creates: an object of that name that exists already raises Conflict and is left as it
        is, in the same request."""
        ...


class MergePatcher(Protocol):
    """Merge-patch an object."""

    async def merge_patch(
        self,
        resource: ResourceType,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386) of the object."""
        ...


class JsonPatcher(Protocol):
    """JSON-patch an object."""

    async def json_patch(
        self,
        resource: ResourceType,
        name: str,
        operations: Sequence[dict[str, Any]],
        *,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]:
        """A JSON patch (RFC 6902) of the object itself. A ``test`` operation that fails
        raises :class:`~kaiwo_kube.errors.Invalid` and nothing changes: the patch's
        preconditions (its uid, the value it replaces)."""
        ...


class ObjectDeleter(Protocol):
    """Delete an object."""

    async def delete(
        self,
        resource: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        propagation: PropagationPolicy = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        """Delete; ``uid``/``resource_version`` are preconditions (Conflict when they differ)."""
        ...


class ObjectWriter(
    ObjectCreator, ObjectReplacer, ObjectApplier, MergePatcher, JsonPatcher, ObjectDeleter, Protocol
):
    """Create, replace, apply, patch and delete objects."""


class StatusWriter(Protocol):
    """Write an object's status through its status subresource."""

    async def patch_status(
        self,
        resource: ResourceType,
        name: str,
        status: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str,
        method: Literal["apply", "merge"] = "apply",
        force: bool = True,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """Write ``status`` through the status subresource, by SSA (default) or merge patch.

        ``resource_version`` is a precondition: Conflict when the object has moved on since."""
        ...


class ScaleReader(Protocol):
    """Read an object's scale subresource."""

    async def get_scale(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """The ``autoscaling/v1`` Scale of an object with a scale subresource. A custom object
        without its spec replicas field has none to read: the API server answers 500
        (:class:`~kaiwo_kube.errors.Retryable`); read the object itself instead."""
        ...


class ScalePatcher(Protocol):
    """Set replicas through the scale subresource."""

    async def patch_scale(
        self,
        resource: ResourceType,
        name: str,
        *,
        replicas: int,
        expected_replicas: int | None = None,
        read_at: str | None = None,
        namespace: str | None = None,
        field_manager: str,
    ) -> dict[str, Any]:
        """Set ``spec.replicas`` through the scale subresource (a JSON patch); returns the
        Scale. With ``read_at`` (a resourceVersion of the object) the patch holds only while
        the object is still that version: any write since (a spec edit, a status write)
        makes it :class:`~kaiwo_kube.errors.Invalid` and nothing changes. With
        ``expected_replicas`` the patch holds only while the replicas are that
        many: otherwise :class:`~kaiwo_kube.errors.Invalid` (the patch's test failed) and
        nothing changes; ``expected_replicas=0`` holds at 0 replicas (the Scale then shows
        none: autoscaling/v1 omits a zero), not for a custom object without the field.
        Without, the field is set whether the object had it or not (a custom object may lack
        it, which no test can express)."""
        ...


class Scaler(ScaleReader, ScalePatcher, Protocol):
    """Read and set replicas through the scale subresource."""


class EventRecorder(Protocol):
    """Record core/v1 Events (shown by ``kubectl describe``)."""

    async def create_event(
        self,
        *,
        involved: dict[str, Any],
        type: EventType,
        reason: str,
        message: str,
        component: str,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """Record a core/v1 Event about ``involved`` (shown by ``kubectl describe``)."""
        ...


class CrdInstaller(Protocol):
    """Install CustomResourceDefinitions and wait until they are served."""

    async def apply_crd(self, crd: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
        """Apply one CustomResourceDefinition (forced) and return it."""
        ...

    async def ensure_crds(
        self, crds: Iterable[dict[str, Any]], *, field_manager: str, within: float = 30.0
    ) -> None:
        """Apply the CRDs and wait (``within`` seconds) until each is Established, every
        served version is listed in discovery and the stored one answers a list, so its
        kind can be used at once."""
        ...


class KubernetesPort(
    ObjectReader, ObjectWriter, StatusWriter, Scaler, EventRecorder, CrdInstaller, Protocol
):
    """A Kubernetes API server as the operator sees it: every protocol above, and a connection
    to release. The adapter implements them all; a caller asks for less (see above)."""

    async def close(self) -> None:
        """Release connections."""
        ...
