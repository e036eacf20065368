"""The plan: what the planner decides for one owner object, and what the executor carries out.

A plan is level-triggered and complete: it lists every child object that must exist for its
owner (full manifests, ready for server-side apply), the owner's status as the planner computed
it, the Kubernetes Events to emit, and the kinds of owned children to prune when they are not
in ``desired``. Applying the same plan twice changes nothing.

Everything here is deterministic: ``desired`` is sorted by (apiVersion, kind, namespace, name)
and :func:`canonical_json` gives byte-identical output for equal plans, which is what
replay compares.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)
from pydantic.alias_generators import to_camel

OPERATOR_FIELD_MANAGER = "kaiwo"
"""The field manager of every child the executor writes (server-side apply, merge patch)."""
CREATE_SUSPENDED_FIELD_MANAGER = "kaiwo-create"
"""The field manager of a desired manifest that sets ``spec.suspend: true``: a child created
suspended for admission (a Job or RayJob Kueue admits). The plans made once the child exists
leave ``suspend`` out, and a field left out of an apply is removed only from its own
manager's fields: applied under ``kaiwo``, the later applies would take the field away (and
start the Job unadmitted); held by ``kaiwo-create``, it stays until Kueue takes it over."""
OPERATOR_FIELD_MANAGERS = frozenset({OPERATOR_FIELD_MANAGER, CREATE_SUSPENDED_FIELD_MANAGER})
STATUS_FIELD_MANAGER = "kaiwo-status"
"""The field manager of the statuses the executor writes through the status subresource."""


class _Contract(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
    )


RefKey: TypeAlias = tuple[str, str, str, str, str]
"""An :class:`ObjectRef` as a plain tuple: (apiVersion, kind, namespace or "", name, uid or "").

Hashable, ordered as :meth:`ObjectRef.sort_key` then by uid, and a twelfth of the model's
memory (about 80 bytes against 1,000): for what is held per object of the cluster, such as
the planner's preemption candidates. :meth:`ObjectRef.of_key` makes the model again."""


class ObjectRef(_Contract):
    """Identifies one Kubernetes object; ``namespace`` is None for cluster-scoped ones."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> ObjectRef:
        """The reference (with its uid, when it has one) to the object ``manifest`` describes;
        a ``metadata`` field that is not a string counts as absent."""
        return cls.of_key(cls.key_of(manifest))

    @staticmethod
    def key_of(manifest: Mapping[str, Any]) -> RefKey:
        """:meth:`key` of :meth:`of`, without making the model."""
        metadata = manifest.get("metadata")
        if not isinstance(metadata, Mapping):
            metadata = {}
        return (
            str(manifest.get("apiVersion", "")),
            str(manifest.get("kind", "")),
            _text(metadata.get("namespace")),
            _text(metadata.get("name")),
            _text(metadata.get("uid")),
        )

    @classmethod
    def of_key(cls, key: RefKey) -> ObjectRef:
        api_version, kind, namespace, name, uid = key
        return cls(
            api_version=api_version,
            kind=kind,
            name=name,
            namespace=namespace or None,
            uid=uid or None,
        )

    def key(self) -> RefKey:
        return (self.api_version, self.kind, self.namespace or "", self.name, self.uid or "")

    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.api_version, self.kind, self.namespace or "", self.name)

    def display(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}"


class EventIntent(_Contract):
    """A Kubernetes Event the executor records on the owner (``core/v1`` Event)."""

    type: Literal["Normal", "Warning"]
    reason: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$")
    message: str


class PruneRule(_Contract):
    """Owned children of these kinds, carrying ``selector`` labels, are deleted unless desired."""

    api_version: str
    kind: str
    namespaced: bool = True


class ScaleIntent(_Contract):
    """Set ``target``'s replicas through its scale subresource, if they still are
    ``from_replicas`` (the value the decision was made from; else the scale is left alone and
    the next decision starts from what it finds). ``target`` is the plan's owner: a plan scales
    nothing else (``kaiwo_contracts.confinement``)."""

    target: ObjectRef
    replicas: int = Field(ge=0)
    from_replicas: int = Field(ge=0)


class PlanSource(_Contract):
    """One object a plan was computed from, as the planner held it: the owner itself and the
    configuration objects whose values shaped the plan (the KaiwoConfig, the namespace's
    AIMNamespaceConfig, the Models' system configuration).

    ``digest`` is :func:`kaiwo_contracts.plan_sources.source_digest` of the object: what
    people write in it (everything but ``metadata`` and ``status``, its labels but the
    operator's own, its annotations, and whether it is being deleted). The executor compares
    it with the object as the API server holds it and carries the plan out only when they
    agree, so an observation that was forged (or the planner's copy that went wrong) produces
    nothing. None: the planner held only part of the object (too large for the bus), and
    only its identity is compared.

    ``generation`` and ``resource_version`` say which version it was: a plan made from a
    version older than the live one is *stale* (the planner plans the newer one as well),
    not refused. The resourceVersion moves with every status write, the planner's own
    included, so it is left out of the plan's fingerprint (as ``observed_resource_version``
    is): a status write never makes a plan news.
    """

    ref: ObjectRef
    generation: int | None = None
    resource_version: str | None = None
    digest: str | None = None


class FinalizerRelease(_Contract):
    """Another controller's finalizers to take off a child the plan deletes (``Plan.delete``),
    by uid: Kueue's ``resource-in-use`` on a ResourceFlavor still named by a ClusterQueue,
    once the planner found no admitted workload using it (decision 0048)."""

    target: ObjectRef
    finalizers: tuple[str, ...]


class PreemptIntent(_Contract):
    """Preempt the GPU workload rooted at ``target`` (GPU idle preemption of a workload no
    Kaiwo kind owns, decision 0047): delete it (background propagation, its uid a
    precondition), or set its replicas to 0 through its scale subresource if they still are
    ``from_replicas``. Only a GpuWorkload's plan preempts, only the workload its spec names,
    and only when that workload or its namespace opted in (``kaiwo_contracts.confinement``)."""

    target: ObjectRef
    action: Literal["delete", "scale-to-zero"]
    from_replicas: int | None = Field(default=None, ge=0)


def _empty(value: object) -> bool:
    return not value


def _none(value: object) -> bool:
    return value is None


class Plan(_Contract):
    """Everything that must be true for one owner object.

    ``owner``: the object this plan is for (a KaiwoJob, a KaiwoQueueConfig, ...).
    ``observed_generation`` / ``observed_resource_version``: the owner state planned from.
    ``desired``: full manifests to server-side apply, sorted (see :func:`sort_objects`).
    ``status``: the owner's ``status`` as computed (written through the status subresource),
    or None when the owner has no status to write.
    ``events``: Events to emit on the owner, for people reading ``kubectl describe``.
    ``prune``: kinds whose owned, operator-labelled children are deleted when not in desired.
    ``prune_selector``: the inventory labels identifying this owner's children.
    ``delete_owner``: the owner itself must be deleted (for example after a duration-based
    preemption); the executor deletes it with background propagation.
    ``create_only``: each desired object is created when missing and otherwise left as it
    is, never applied: objects the operator makes for the user and leaves to them (the
    default KaiwoConfig and KaiwoQueueConfig), so no field of theirs is the operator's.
    ``delete``: children to delete now, each named with its uid (a precondition): the Pods a
    Model's rollout replaces one by one, which no selector could tell from those it keeps.
    ``shared``: objects several owners use (the PVC of a Model cache profile): created when
    missing, never updated, never pruned, owned by none of them.
    ``finalizers``: the operator's finalizers the owner must carry, exactly (None: leave the
    owner's finalizers alone); which names are the operator's is the owner kind's
    confinement (``kaiwo_contracts.confinement``).
    ``scale``: the owner's replicas to set through its scale subresource (a Model the
    autoscaler scales), or None.
    ``owner_labels``: the operator's labels the owner must carry, exactly (None: leave the
    owner's labels alone): keys under the owner kind's label prefixes (its confinement) not
    listed are removed, every other label is the user's and kept (a Model's
    ``features.kubeai.org/<feature>`` labels).
    ``sources``: what the plan was computed from (:class:`PlanSource`): its owner first, then
    the configuration objects it read, sorted. The executor refuses a plan whose sources do
    not match the live objects (decision 0038).
    ``release_finalizers``: finalizers of other controllers to remove from children the plan
    deletes, so that their deletion completes (the owner kind's confinement lists which).
    ``preempt``: the workload a GpuWorkload's plan preempts (:class:`PreemptIntent`), or None.

    The fields from ``delete`` on are left out of the JSON while empty (None), like
    ``create_only``.
    """

    owner: ObjectRef
    observed_generation: int | None = None
    observed_resource_version: str | None = None
    desired: tuple[dict[str, Any], ...] = ()
    status: dict[str, Any] | None = None
    events: tuple[EventIntent, ...] = ()
    prune: tuple[PruneRule, ...] = ()
    prune_selector: dict[str, str] = Field(default_factory=dict)
    delete_owner: bool = False
    # Fields added later are left out while unused: plans recorded before they existed keep
    # their bytes and fingerprints, and external readers of ordinary plans see nothing new.
    # (``exclude_if`` rather than a wrap serializer: a third of the cost of every dump.)
    create_only: bool = Field(default=False, exclude_if=_empty)
    delete: tuple[ObjectRef, ...] = Field(default=(), exclude_if=_empty)
    shared: tuple[dict[str, Any], ...] = Field(default=(), exclude_if=_empty)
    finalizers: tuple[str, ...] | None = Field(default=None, exclude_if=_none)
    scale: ScaleIntent | None = Field(default=None, exclude_if=_none)
    owner_labels: dict[str, str] | None = Field(default=None, exclude_if=_none)
    sources: tuple[PlanSource, ...] = Field(default=(), exclude_if=_empty)
    release_finalizers: tuple[FinalizerRelease, ...] = Field(default=(), exclude_if=_empty)
    preempt: PreemptIntent | None = Field(default=None, exclude_if=_none)

    def fingerprint(self) -> str:
        """A stable hash of what the plan asks for; equal plans have equal fingerprints.

        Excludes the observed resourceVersion, the owner's and that of every source, so a
        no-op update to the owner (its status written) does not count as a new plan.

        The hash of :meth:`fingerprint_document`'s canonical JSON, mostly written without
        that document: see :meth:`_fingerprint_parts`.
        """
        return fingerprint_of(self.fingerprint_bytes())

    def fingerprint_bytes(self) -> bytes:
        """What :meth:`fingerprint` hashes: the canonical JSON of
        :meth:`fingerprint_document`. Two plans have equal fingerprints exactly when these
        are equal, so a caller holding one plan's bytes compares another's without hashing."""
        written = _written_by_orjson(self._fingerprint_parts())
        if written is None:
            written = canonical_json_bytes(self.fingerprint_document())
        return written

    def fingerprint_document(self) -> dict[str, Any]:
        """What :meth:`fingerprint` hashes, as JSON-ready data (field names as keys): a
        caller that hashes a variant of the plan too edits this instead of dumping again."""
        return self.model_dump(mode="json", exclude=_VERSIONS)

    def _fingerprint_parts(self) -> dict[str, Any]:
        """:meth:`fingerprint_document` with the plan's own free-form documents (``desired``,
        ``shared``, ``status``) in it, not copies: a JSON-mode dump copies them whole, and
        that copy was a third of a plan's hashing (decision 0091).

        Wherever orjson writes these parts as the standard library would
        (:func:`_written_by_orjson`), the bytes are those of the dump's canonical JSON. The
        dump changes only values that are not JSON, and orjson writes each of those as the
        dump's result would be written, or refuses it:
        - NaN and infinities become None in the dump; orjson writes them ``null`` too;
        - tuples become lists, subclasses of str, int, dict and list their base, enums their
          value, UUIDs their text: orjson writes each so;
        - a datetime, date or time, a dataclass, a Decimal, a set, bytes, a model, a key that
          is not text, an integer beyond 64 bits, a lone surrogate: orjson refuses them.
        """
        document = self.model_dump(mode="json", exclude=_VERSIONS_AND_DOCUMENTS)
        document["desired"] = self.desired
        document["status"] = self.status
        if self.shared:  # left out while empty, as the dump does (``exclude_if``)
            document["shared"] = self.shared
        return document


def fingerprint_bytes_of_wire(document: Mapping[str, Any]) -> bytes:
    """What :meth:`Plan.fingerprint` would hash for the plan whose wire form (its JSON dump,
    as published and recorded) is ``document``, written from that form without validating
    it: the document less the observed resourceVersions, as canonical JSON.

    A plan's wire form is the very dump its fingerprint document is (field names are the
    aliases in both), so for a plan as published these are :meth:`Plan.fingerprint_bytes`.
    A document that is not such a dump gives other bytes, which its fingerprint does not
    hash (a caller checks the hash before trusting them)."""
    written = {key: value for key, value in document.items() if key != _OBSERVED_VERSION_KEY}
    sources = written.get(_SOURCES_KEY)
    if isinstance(sources, list):
        written[_SOURCES_KEY] = [
            {key: value for key, value in source.items() if key != _SOURCE_VERSION_KEY}
            if isinstance(source, Mapping)
            else source
            for source in sources
        ]
    return canonical_json_bytes(written)


def fingerprint_of(written: bytes) -> str:
    """The fingerprint of a plan whose :meth:`Plan.fingerprint_bytes` are ``written``."""
    return hashlib.sha256(written).hexdigest()


def document_fingerprint(document: Mapping[str, Any]) -> str:
    """The SHA-256 of ``document``'s canonical JSON (:meth:`Plan.fingerprint` of a plan's
    :meth:`Plan.fingerprint_document`)."""
    return fingerprint_of(canonical_json_bytes(document))


_VERSIONS: Any = {
    "observed_resource_version": True,
    "sources": {"__all__": {"resource_version"}},
}
"""What :meth:`Plan.fingerprint` leaves out (pydantic's nested ``exclude``)."""
_VERSIONS_AND_DOCUMENTS: Any = {**_VERSIONS, "desired": True, "shared": True, "status": True}
_OBSERVED_VERSION_KEY: Final = to_camel("observed_resource_version")
_SOURCES_KEY: Final = to_camel("sources")
_SOURCE_VERSION_KEY: Final = to_camel("resource_version")
"""The wire names of what :data:`_VERSIONS` leaves out (:func:`fingerprint_bytes_of_wire`)."""


def created_suspended(manifest: dict[str, Any]) -> bool:
    """The manifest creates its object suspended for admission (see
    :data:`CREATE_SUSPENDED_FIELD_MANAGER`)."""
    spec = manifest.get("spec")
    return isinstance(spec, dict) and spec.get("suspend") is True


def without_admission_gate(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest without ``spec.suspend``: what later plans of an existing child send, as
    they leave ``suspend`` to Kueue. A manifest that differs from another only there asks for
    no change of an object that exists."""
    spec = manifest.get("spec")
    if not isinstance(spec, dict) or "suspend" not in spec:
        return manifest
    return {**manifest, "spec": {k: v for k, v in spec.items() if k != "suspend"}}


def object_sort_key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def sort_objects(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Objects in the one order every plan uses: apiVersion, kind, namespace, name."""
    return tuple(sorted(objects, key=object_sort_key))


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: equal values, equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json_bytes(value: Any) -> bytes:
    """``canonical_json(value).encode()``, byte for byte, in a fraction of the time, for a
    JSON value (no NaN or infinity: orjson writes them ``null``, this module's JSON
    ``NaN``; a JSON-mode dump and parsed JSON hold none).

    orjson writes everything else as the standard library does, but a float below 1e-4 (it
    writes ``0.00001`` and ``1e-9`` for ``1e-05`` and ``1e-09``). Those, and what orjson
    refuses (integers beyond 64 bits, lone surrogates, keys that are not strings), are
    written by :func:`canonical_json`: a hash over these bytes is the one over its bytes.
    """
    written = _written_by_orjson(value)
    return canonical_json(value).encode() if written is None else written


def _written_by_orjson(value: Any) -> bytes | None:
    """``value``'s canonical JSON as orjson writes it, when it writes it at all and writes no
    float below 1e-4 (see :func:`canonical_json_bytes`); otherwise None."""
    try:
        written = orjson.dumps(value, option=_SORTED_NOTHING_BEYOND_JSON)
    except TypeError:  # orjson.JSONEncodeError
        return None
    return None if _maybe_a_small_float(written) else written


_SORTED_NOTHING_BEYOND_JSON: Final = (
    orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)
"""Sorted keys; a datetime or dataclass refused, as the standard library refuses them."""
_ONE_DIGIT_NEGATIVE_EXPONENT: Final = re.compile(rb"e-\d(?=[,\]}]|\Z)")
"""Where orjson writes a float below 1e-4 otherwise than the standard library: ``1e-9`` for
``1e-09`` (from ``e-10`` on, both write the same; what ends a number follows), or
``0.00001`` for ``1e-05`` (four zeros after the point). A string holding either
(``"0.00001"``, ``"x1e-5,"``) takes the slow path too, to the same bytes. Both are searched
for their literal start: fast (a uid's ``…5e-0ea1…`` does not match)."""


def _maybe_a_small_float(written: bytes) -> bool:
    return b"0.0000" in written or _ONE_DIGIT_NEGATIVE_EXPONENT.search(written) is not None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
