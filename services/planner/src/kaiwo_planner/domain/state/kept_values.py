"""Values kept from one plan to the next, keyed by the identity of the objects they come from.

Nearly every observation makes a new cluster snapshot, but few change what a given value is
worked out from: a parsed KaiwoConfig, the node pools, a workload's parsed spec or the
children it needs. The projection replaces an observed object when it changes and never
edits one in place, so the *same object* means the same value, and identity is a cheap and
exact test (equal copies count as new versions, which is merely a recomputation). Values
that depend on part of an object only may put a version of that part in the key instead
(the children of a workload: its generation, labels and annotations).

The store is bounded: least recently used entries go once there are :data:`LIMIT` of them.
Per-cluster values (a handful of keys) are used by every plan and so never go; per-workload
values stay for the workloads that are active, which is where re-planning happens. The
planner is single-threaded (one asyncio loop), so the store needs no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

_T = TypeVar("_T")

LIMIT = 1024
"""Entries kept at most: a few per-cluster ones, the rest about two per recently planned
workload (its parsed object and its children), so some 500 active workloads; a few MB."""

_KEPT: OrderedDict[Hashable, tuple[tuple[object, ...], Any]] = OrderedDict()


def kept(key: Hashable, inputs: tuple[object, ...], compute: Callable[[], _T]) -> _T:
    """``compute()``, reused while ``inputs`` are the very same objects as last time.

    Only for values worked out from ``inputs`` alone and from the (hashable, compared by
    equality) constants in ``key``. The inputs are held, so their ids cannot be reused by
    other objects while the entry lives. Callers must not modify the returned value.
    """
    found = _KEPT.get(key)
    if found is not None:
        held, value = found
        if len(held) == len(inputs) and all(a is b for a, b in zip(held, inputs, strict=True)):
            _KEPT.move_to_end(key)
            return value  # type: ignore[no-any-return]
    value = compute()
    _KEPT[key] = (inputs, value)
    _KEPT.move_to_end(key)
    if len(_KEPT) > LIMIT:
        _KEPT.popitem(last=False)
    return value


def kept_count() -> int:
    """How many values are kept now."""
    return len(_KEPT)


def forget_kept() -> None:
    """Drop every kept value: the next plans work everything out afresh (for tests)."""
    _KEPT.clear()
