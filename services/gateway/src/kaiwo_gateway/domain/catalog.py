"""Which Models the gateway serves and the ready endpoints of each, from observations.

The watcher publishes every Model and every Pod the operator made for one (labelled
``app.kubernetes.io/managed-by=kaiwo`` and ``kaiwo.silogen.ai/owner-uid``); the gateway
keeps the latest version of each, by uid, dropping anything older than what it holds (by
``resourceVersion``; a deletion leaves a tombstone so a late, older event cannot revive it).
The tombstones of the last :data:`TOMBSTONES_KEPT` deletions are kept, no more: the catalog's
memory follows what is live, not every Pod that ever came and went.

An endpoint is a Pod of the Model (same namespace, ``owner-uid`` = the Model's uid,
``model=<name>``) that is Ready, not being deleted and has an IP; its port is the
``model-pod-port`` annotation (else 8000) and its adapters the suffixes of its
``adapter.kubeai.org/<name>`` labels, as upstream's load balancer reads them. A Model whose
spec does not validate is not served (the operator reports it on the Model). A Model whose
``Configured`` condition is False for its current generation (the operator cannot make Pods
of this spec: an unknown resource profile, an invalid system configuration) keeps that
condition's message (:attr:`ServedModel.not_configured`): no request waits for a server that
will not come.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.crds.kubeai_v1.model import ModelSpec
from pydantic import ValidationError

from kaiwo_gateway.domain.autoscaling import ScalingSpec
from kaiwo_gateway.domain.selectors import LabelSelector

LABEL_MODEL = "model"
LABEL_OWNER_UID = "kaiwo.silogen.ai/owner-uid"
ADAPTER_LABEL_PREFIX = "adapter.kubeai.org/"
ANNOTATION_POD_PORT = "model-pod-port"
DEFAULT_POD_PORT = 8000
MODEL_KIND = "Model"
POD_KIND = "Pod"

ANY_NAMESPACE: tuple[str, ...] = ()

TOMBSTONES_KEPT: Final = 10_000
"""Deleted objects whose last version is remembered. A late event comes from a redelivery or
a relist seconds behind, not ten thousand deletions behind (Pods of Models that scale up and
down every few minutes)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One ready model-server Pod: ``key`` is ``<namespace>/<pod>``, ``address`` host:port."""

    key: str
    address: str
    adapters: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class PrefixHashSettings:
    mean_load_factor: int
    replication: int
    prefix_char_length: int


@dataclass(frozen=True, slots=True)
class ServedModel:
    """What the gateway needs of one Model."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    features: tuple[str, ...]
    adapters: tuple[str, ...]
    owner: str
    created: int
    """Unix seconds of ``metadata.creationTimestamp`` (``created`` in ``/v1/models``)."""
    strategy: str
    prefix_hash: PrefixHashSettings
    generation: int = 0
    """``metadata.generation``: the spec version the autoscaler decides from."""
    scaling: ScalingSpec = field(default_factory=lambda: ScalingSpec(replicas=None))
    """The fields the autoscaler reads, ``spec.replicas`` among them."""
    not_configured: str | None = None
    """Why the operator makes no Pod of this spec (the message of ``Configured=False`` for
    the Model's current generation); None when it does, or has not said yet."""


@dataclass(frozen=True, slots=True)
class _Version:
    resource_version: str
    deleted: bool


@dataclass
class Catalog:
    """The latest Models and model-server Pods, kept by uid; Models outside ``namespaces``
    (when given) are not served."""

    namespaces: tuple[str, ...] = ANY_NAMESPACE
    _models: dict[str, ServedModel] = field(default_factory=dict)
    _endpoints: dict[str, dict[str, Endpoint]] = field(default_factory=dict)
    """Model uid -> Pod uid -> endpoint (ready Pods only)."""
    _pod_owner: dict[str, str] = field(default_factory=dict)
    _versions: dict[str, _Version] = field(default_factory=dict)
    _tombstones: dict[str, None] = field(default_factory=dict)
    """The uids of ``_versions`` that are deletions, oldest first."""
    tombstones_kept: int = TOMBSTONES_KEPT
    generation: int = 0
    """Grows with every change to the Models or endpoints (waiters compare it)."""

    def apply(self, *, kind: str, event: str, obj: Mapping[str, Any]) -> bool:
        """Take in one observation (``event`` is the watch event type: ``DELETED`` removes,
        anything else is the object's current state); whether anything served changed."""
        metadata = obj.get("metadata") or {}
        uid = str(metadata.get("uid") or "")
        version = str(metadata.get("resourceVersion") or "")
        if not uid or not self._is_newer(uid, version):
            return False
        deleted = event == "DELETED"
        self._remember(uid, _Version(resource_version=version, deleted=deleted))
        if kind == MODEL_KIND:
            changed = self._apply_model(uid, None if deleted else self._served(obj))
        elif kind == POD_KIND:
            changed = self._apply_pod(uid, obj, deleted=deleted)
        else:
            return False
        if changed:
            self.generation += 1
        return changed

    def _served(self, obj: Mapping[str, Any]) -> ServedModel | None:
        model = served_model(obj)
        if model is None or (self.namespaces and model.namespace not in self.namespaces):
            return None
        return model

    def _remember(self, uid: str, version: _Version) -> None:
        self._versions[uid] = version
        self._tombstones.pop(uid, None)
        if not version.deleted:
            return
        self._tombstones[uid] = None
        if len(self._tombstones) > self.tombstones_kept:
            oldest = next(iter(self._tombstones))
            del self._tombstones[oldest]
            del self._versions[oldest]

    def _is_newer(self, uid: str, version: str) -> bool:
        known = self._versions.get(uid)
        if known is None:
            return True
        if version.isdigit() and known.resource_version.isdigit():
            return int(version) > int(known.resource_version)
        return version != known.resource_version

    def _apply_model(self, uid: str, model: ServedModel | None) -> bool:
        before = self._models.get(uid)
        if model is None:
            self._models.pop(uid, None)
        else:
            self._models[uid] = model
        return before != model

    def _apply_pod(self, uid: str, obj: Mapping[str, Any], *, deleted: bool) -> bool:
        owner = pod_owner(obj)
        previous_owner = self._pod_owner.pop(uid, None)
        before = None
        if previous_owner is not None:
            held = self._endpoints.get(previous_owner, {})
            before = held.pop(uid, None)
            if not held:
                self._endpoints.pop(previous_owner, None)
        endpoint = None if deleted or owner is None else pod_endpoint(obj)
        if owner is not None and endpoint is not None:
            self._pod_owner[uid] = owner
            self._endpoints.setdefault(owner, {})[uid] = endpoint
        return before != endpoint

    # ------------------------------------------------------------------ queries

    def models(self) -> tuple[ServedModel, ...]:
        return tuple(sorted(self._models.values(), key=lambda m: (m.name, m.namespace)))

    def model(self, uid: str) -> ServedModel | None:
        """The Model with this uid as the catalog holds it now."""
        return self._models.get(uid)

    def named(self, name: str, selector: LabelSelector) -> tuple[ServedModel, ...]:
        """Models called ``name`` whose labels the selector matches (one per namespace)."""
        return tuple(
            sorted(
                (
                    model
                    for model in self._models.values()
                    if model.name == name and selector.matches(model.labels)
                ),
                key=lambda m: m.namespace,
            )
        )

    def endpoints(self, model: ServedModel) -> tuple[Endpoint, ...]:
        """The ready endpoints of a Model, whose Pods name it and sit in its namespace."""
        found = self._endpoints.get(model.uid, {}).values()
        return tuple(
            sorted(
                (e for e in found if e.key.startswith(f"{model.namespace}/")),
                key=lambda e: e.key,
            )
        )


def served_model(obj: Mapping[str, Any]) -> ServedModel | None:
    """The Model's routing facts, or None when its spec does not validate."""
    metadata = obj.get("metadata") or {}
    try:
        spec = ModelSpec.model_validate(obj.get("spec") or {})
    except ValidationError:
        return None
    prefix = spec.load_balancing.prefix_hash
    return ServedModel(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        labels=dict(metadata.get("labels") or {}),
        features=tuple(spec.features or ()),
        adapters=tuple(adapter.name for adapter in spec.adapters or ()),
        owner=spec.owner,
        created=_unix_seconds(metadata.get("creationTimestamp")),
        strategy=spec.load_balancing.strategy,
        prefix_hash=PrefixHashSettings(
            mean_load_factor=prefix.mean_load_factor,
            replication=max(prefix.replication, 1),
            prefix_char_length=max(prefix.prefix_char_length, 0),
        ),
        generation=_generation(metadata.get("generation")),
        not_configured=not_configured(obj),
        scaling=ScalingSpec(
            replicas=spec.replicas,
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
            autoscaling_disabled=spec.autoscaling_disabled,
            target_requests=spec.target_requests,
            scale_down_delay_seconds=max(spec.scale_down_delay_seconds, 0),
        ),
    )


def not_configured(obj: Mapping[str, Any]) -> str | None:
    """The message of the Model's ``Configured=False`` condition when it was written for the
    Model's current generation (one for an earlier spec says nothing of this one), else None."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    generation = _generation((obj.get("metadata") or {}).get("generation"))
    for condition in conditions if isinstance(conditions, list) else ():
        if not isinstance(condition, Mapping) or condition.get("type") != "Configured":
            continue
        if condition.get("status") != "False" or generation == 0:
            return None
        if _generation(condition.get("observedGeneration")) != generation:
            return None
        return str(condition.get("message") or condition.get("reason") or "not configured")
    return None


def _generation(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def pod_owner(obj: Mapping[str, Any]) -> str | None:
    """The uid of the Model a model-server Pod belongs to (None for any other Pod)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if LABEL_MODEL not in labels:
        return None
    owner = labels.get(LABEL_OWNER_UID)
    return str(owner) if owner else None


def pod_endpoint(obj: Mapping[str, Any]) -> Endpoint | None:
    """The endpoint a Pod offers: None unless it is Ready, has an IP and is not going."""
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if metadata.get("deletionTimestamp") or not status.get("podIP"):
        return None
    if not _ready(status.get("conditions") or ()):
        return None
    port = _port((metadata.get("annotations") or {}).get(ANNOTATION_POD_PORT))
    if port is None:
        return None
    labels = metadata.get("labels") or {}
    return Endpoint(
        key=f"{metadata.get('namespace')}/{metadata.get('name')}",
        address=f"{_host(str(status['podIP']))}:{port}",
        adapters=frozenset(
            key.removeprefix(ADAPTER_LABEL_PREFIX)
            for key in labels
            if key.startswith(ADAPTER_LABEL_PREFIX)
        ),
    )


def _ready(conditions: Iterable[Any]) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def _port(annotation: Any) -> int | None:
    if annotation is None:
        return DEFAULT_POD_PORT
    text = str(annotation)
    if not text.isdigit() or not 0 < int(text) < 65536:
        return None  # as upstream: a Pod with an unusable port annotation is no endpoint
    return int(text)


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


def _unix_seconds(timestamp: Any) -> int:
    if not isinstance(timestamp, str):
        return 0
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0
