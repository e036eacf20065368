"""Does an object as the API server holds it carry what a manifest asks for?

The API server never hands back exactly what was written: it fills in defaults (built-in
types, and every ``default`` of a CRD's structural schema), omits zero values it does not
store (``omitempty``), writes quantities in canonical form (``0.5`` -> ``500m``) and adds
fields others manage (labels of the Job controller, list items of other field managers). So
"equal" is the wrong test for "what we asked for is there"; :func:`contains` is the one every
decision uses (drift, through :func:`carries`; the fields a Job can no longer take):

* a mapping contains another when it holds each of its keys with a contained value; a key
  the server left out counts as holding a zero value (``None``, ``""``, ``0``, ``False``,
  ``[]``, ``{}``), which is what ``omitempty`` drops;
* a list of mappings (containers, env, ports, conditions: lists merged by key) contains each
  wanted item in one of its own items, in any order, and may hold more;
* any other list (args, command, access modes: atomic lists) must match item for item;
* scalars match when equal, equal as text (``4`` and ``"4"``), or equal as quantities, or
  when the observed one is the value Kueue stores for the wanted one (:data:`KUEUE_STORES`).

``contains`` is too lenient for a field whose CRD makes it *atomic* (a list without a list
type, ``x-kubernetes-list-type: atomic``, ``x-kubernetes-map-type: atomic``): the operator's
forced apply replaces such a field whole, so what it holds beyond the manifest, or in another
order, is a hand edit the apply undoes, not another manager's addition. :func:`carries` is
``contains`` and, for the atomic fields of the Kueue kinds the operator writes
(:data:`KUEUE_ATOMIC_FIELDS`), equality (:func:`same_exactly`; decision 0226). Kueue's
scheduler reads a ClusterQueue's ``resourceGroups`` in order (the flavors are tried so), and a
``namespaceSelector`` of ``{}`` asks for every namespace, which ``contains`` took any selector
to hold.

``contains`` cannot see what a manifest *stopped* asking for: an observed object holds more
than was written anyway. :func:`removed_paths` names the one kind of removal that is surely
the manifest's own: an item of a pod's named lists (:data:`NAMED_POD_LISTS`: containers, env,
volumes, mounts, pull secrets), which neither the API server's defaults nor Kueue add to a
pod template.

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from kaiwo_planner.domain.state.nodes import parse_quantity

_ZERO_VALUES: tuple[Any, ...] = (None, "", 0, False)

_SCALARS: Final = (str, int, float, type(None))
"""Leaves of a manifest, told apart before any ``Mapping`` test: most values walked are
leaves, and an ``isinstance`` against an abstract class goes through Python code
(``ABCMeta.__instancecheck__``) where one against these built-in types does not."""

KUEUE_STORES: Final[Mapping[str, str]] = MappingProxyType(
    {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
)
"""Values of the v1beta1 API (a ClusterQueue's ``flavorFungibility.whenCanBorrow`` and
``whenCanPreempt``, as the KaiwoQueueConfig's seed names them) that Kueue 0.15 and later store
as their v1beta2 equivalent and serve back, at v1beta1 too, as that: without this the real
Kueue's ClusterQueue never looks as asked, and the KaiwoQueueConfig never READY (found by
``tests/integration/test_real_stack_queue_config.py``). An older Kueue stores them as written,
which matches as equal."""


def contains(observed: Any, wanted: Any) -> bool:
    """Whether ``observed`` holds every value ``wanted`` sets (see the module docstring)."""
    if isinstance(wanted, _SCALARS) or not isinstance(wanted, Mapping | list):
        return _same_scalar(observed, wanted)
    if isinstance(wanted, Mapping):
        if not isinstance(observed, Mapping):
            return observed is None and not wanted
        return all(
            contains(observed[key], value) if key in observed else _is_zero(value)
            for key, value in wanted.items()
        )
    if not isinstance(observed, list):
        return observed is None and not wanted
    if wanted and all(isinstance(item, Mapping) for item in wanted):
        return all(any(contains(seen, item) for seen in observed) for item in wanted)
    return len(observed) == len(wanted) and all(
        contains(seen, item) for seen, item in zip(observed, wanted, strict=True)
    )


KUEUE_ATOMIC_FIELDS: Final[Mapping[str, tuple[tuple[str, ...], ...]]] = MappingProxyType(
    {
        "ClusterQueue": (
            ("spec", "resourceGroups"),
            ("spec", "namespaceSelector"),
            ("spec", "admissionChecks"),
            ("spec", "admissionChecksStrategy", "admissionChecks"),
        ),
        "ResourceFlavor": (
            ("spec", "nodeLabels"),
            ("spec", "nodeTaints"),
            ("spec", "tolerations"),
        ),
        "Topology": (("spec", "levels"),),
    }
)
"""The fields of Kueue's v1beta1 kinds (``kueue.x-k8s.io``) whose CRD makes them atomic for
server-side apply, by kind: a forced apply of the operator's sets each one whole. None of them
holds a CRD ``default`` (Kueue's defaults are the ClusterQueue's ``queueingStrategy``,
``stopPolicy``, ``flavorFungibility`` and ``preemption``, and ``fairSharing.weight``, which
stay under :func:`contains`). A LocalQueue and a WorkloadPriorityClass have none."""

KUEUE_GROUP: Final = "kueue.x-k8s.io"
_ABSENT: Final = object()


def carries(observed: Any, manifest: Mapping[str, Any]) -> bool:
    """Whether ``observed`` is as ``manifest`` asks: it :func:`contains` the manifest but its
    ``apiVersion`` (the observed copy may be served at another version) and, for a Kueue
    object, holds each atomic field the manifest sets exactly as set
    (:data:`KUEUE_ATOMIC_FIELDS`). What decides drift and a KaiwoQueueConfig's READY."""
    asked = {key: value for key, value in manifest.items() if key != "apiVersion"}
    if not contains(observed, asked):
        return False
    for path in _atomic_fields(manifest):
        wanted, seen = _at(manifest, path), _at(observed, path)
        if wanted is not _ABSENT and not same_exactly(None if seen is _ABSENT else seen, wanted):
            return False
    return True


def same_exactly(observed: Any, wanted: Any) -> bool:
    """Equal, but for what the API server writes differently without changing the value: a
    key left out counts as holding a zero value (either side, ``omitempty``), and scalars
    compare as in :func:`contains` (canonical quantities, text). Lists item by item, in
    order."""
    if isinstance(wanted, Mapping) or isinstance(observed, Mapping):
        if not (isinstance(wanted, Mapping) and isinstance(observed, Mapping)):
            return _is_zero(wanted) and _is_zero(observed)
        return all(same_exactly(observed.get(key), wanted.get(key)) for key in {*observed, *wanted})
    if isinstance(wanted, list) or isinstance(observed, list):
        if not (isinstance(wanted, list) and isinstance(observed, list)):
            return _is_zero(wanted) and _is_zero(observed)
        return len(observed) == len(wanted) and all(
            same_exactly(seen, item) for seen, item in zip(observed, wanted, strict=True)
        )
    if _is_zero(wanted) and _is_zero(observed):
        return True
    return _same_scalar(observed, wanted)


def _atomic_fields(manifest: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    api_version = manifest.get("apiVersion")
    if not isinstance(api_version, str) or api_version.partition("/")[0] != KUEUE_GROUP:
        return ()
    return KUEUE_ATOMIC_FIELDS.get(str(manifest.get("kind")), ())


def _at(document: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(document, Mapping) or key not in document:
            return _ABSENT
        document = document[key]
    return document


def differing_paths(observed: Any, wanted: Any, *, path: str) -> list[str]:
    """The paths under ``path`` where ``wanted`` sets something ``observed`` does not hold.

    Empty exactly when ``contains(observed, wanted)``.
    """
    if isinstance(wanted, _SCALARS):
        return [] if _same_scalar(observed, wanted) else [path]
    if isinstance(wanted, Mapping) and isinstance(observed, Mapping):
        # No ``contains`` first: the keys' paths are empty exactly when it holds, so one walk
        # answers both (asking it at every level walked a Job's template once per level).
        paths: list[str] = []
        for key in sorted(wanted):
            if key in observed:
                paths += differing_paths(observed[key], wanted[key], path=f"{path}.{key}")
            elif not _is_zero(wanted[key]):
                paths.append(f"{path}.{key}")
        return paths
    if contains(observed, wanted):
        return []
    merged_lists = (
        isinstance(wanted, list)
        and isinstance(observed, list)
        and all(isinstance(item, Mapping) for item in wanted)
    )
    if merged_lists and len(wanted) == len(observed):
        paths = []
        for index, (item, seen) in enumerate(zip(wanted, observed, strict=True)):
            paths += differing_paths(seen, item, path=f"{path}[{index}]")
        return paths
    return [path]


NAMED_POD_LISTS: Final = frozenset(
    {"containers", "initContainers", "env", "volumes", "volumeMounts", "imagePullSecrets"}
)
"""The lists of a pod template whose items are named and only ever come from the manifest."""


def removed_paths(observed: Any, wanted: Any, *, path: str) -> list[str]:
    """The items of :data:`NAMED_POD_LISTS` under ``path`` that ``observed`` holds and
    ``wanted`` no longer asks for, as ``<list path>[name=<name>]``.

    Walks the keys both hold (a list of mappings item by item when both are as long); a named
    list ``wanted`` leaves out altogether counts each observed item removed. A Job made with a
    variable that is later dropped (a namespace's ``HF_TOKEN``, an entry of ``spec.env``)
    contains the new manifest, yet applying the manifest would take the variable away.
    """
    if isinstance(observed, _SCALARS):
        return []
    if not (isinstance(observed, Mapping) and isinstance(wanted, Mapping)):
        if isinstance(observed, list) and isinstance(wanted, list) and len(observed) == len(wanted):
            paths: list[str] = []
            for index, (seen, item) in enumerate(zip(observed, wanted, strict=True)):
                paths += removed_paths(seen, item, path=f"{path}[{index}]")
            return paths
        return []
    paths = []
    for key in sorted(observed):
        seen, item = observed[key], wanted.get(key)
        if key in NAMED_POD_LISTS and isinstance(seen, list):
            paths += _removed_items(seen, item if isinstance(item, list) else [], f"{path}.{key}")
        elif key in wanted and not isinstance(seen, _SCALARS):
            paths += removed_paths(seen, item, path=f"{path}.{key}")
    return paths


def _removed_items(observed: list[Any], wanted: list[Any], path: str) -> list[str]:
    wanted_by_name = {
        entry.get("name"): (index, entry)
        for index, entry in enumerate(wanted)
        if isinstance(entry, Mapping)
    }
    paths: list[str] = []
    for seen in observed:
        name = seen.get("name") if isinstance(seen, Mapping) else None
        if not isinstance(name, str) or not name:
            continue
        if name not in wanted_by_name:
            paths.append(f"{path}[name={name}]")
            continue
        index, entry = wanted_by_name[name]
        paths += removed_paths(seen, entry, path=f"{path}[{index}]")
    return paths


def _is_zero(value: Any) -> bool:
    if not isinstance(value, _SCALARS) and isinstance(value, Mapping | Sequence):
        return not value
    return any(
        value is zero or (type(value) is type(zero) and value == zero) for zero in _ZERO_VALUES
    )


def _same_scalar(observed: Any, wanted: Any) -> bool:
    if observed == wanted and type(observed) is type(wanted):
        return True
    if wanted is None or observed is None or isinstance(observed, bool) or isinstance(wanted, bool):
        return False
    if str(observed) == str(wanted):
        return True
    if isinstance(wanted, str) and KUEUE_STORES.get(wanted) == observed:
        return True
    return _same_quantity(observed, wanted)


def _same_quantity(observed: Any, wanted: Any) -> bool:
    if not isinstance(observed, str | int | float) or not isinstance(wanted, str | int | float):
        return False
    if not (may_be_quantity(observed) and may_be_quantity(wanted)):
        return False  # names, images, paths: most strings compared; parsing them raised
    try:
        return parse_quantity(observed) == parse_quantity(wanted)
    except (ValueError, ArithmeticError):
        return False


def may_be_quantity(value: str | int | float) -> bool:
    """False when :func:`~kaiwo_planner.domain.state.nodes.parse_quantity` surely refuses
    ``value``: a text that, stripped, does not start with a digit, a sign or a point (what is
    left, ``inf`` and ``nan``, it refuses too). A cheap test that spares an exception."""
    if not isinstance(value, str):
        return True
    text = value.strip()
    return bool(text) and (text[0] in "+-." or text[0].isdecimal())
