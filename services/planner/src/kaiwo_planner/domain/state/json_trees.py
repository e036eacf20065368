"""Copying the JSON trees that manifests are (dicts, lists and scalars), fast.

``copy.deepcopy`` handles any object graph (memo table, cycles, ``__deepcopy__`` hooks), which
made it the largest cost of a plan. Manifests are trees of dicts, lists and immutable scalars,
so a plain recursive copy gives the same result several times faster; anything else in a tree
(a ``datetime`` a YAML loader produced, say) still goes through ``copy.deepcopy``.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

_T = TypeVar("_T")
_SCALARS = (str, int, float, bool, type(None))


def copy_tree(value: _T) -> _T:
    """A deep copy of a JSON-like tree (same result as ``copy.deepcopy`` for such trees)."""
    return _copy(value)  # type: ignore[no-any-return]


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if isinstance(value, _SCALARS):
        return value
    return copy.deepcopy(value)
