"""Kubernetes' grammar of label keys and values, checked where a user's labels reach a child.

A label map or selector the API server refuses would make every apply of the child fail
(422) once the owner is planned; checked in the model, the owner is reported invalid instead,
naming the key.
"""

from __future__ import annotations

import re

from pydantic_core import PydanticCustomError

QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$"
)
"""A label key, taint key or extended resource name (Kubernetes' qualified name), as a
schema pattern: the API server checks it too. The prefix's 253 characters are a
``maxLength`` beside it."""
QUALIFIED_NAME_MAX_LENGTH = 253 + 1 + 63

_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def label_key_valid(key: str) -> bool:
    """An optional DNS-subdomain prefix and ``/``, then a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and _LABEL_PREFIX.fullmatch(prefix)):
        return False
    return len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def checked_label_key(key: str) -> str:
    """``key`` when it is a label key; a validation error naming it otherwise."""
    if not label_key_valid(key):
        raise PydanticCustomError(
            "label_key",
            "{key} is no label key: an optional DNS prefix and '/', then at most 63 "
            "letters, digits, '-', '_' and '.', beginning and ending with a letter or digit",
            {"key": repr(key)},
        )
    return key


def checked_labels(labels: dict[str, str] | None) -> dict[str, str] | None:
    """``labels`` when every key and value follows the grammar; an error naming the first
    that does not otherwise."""
    for key, value in (labels or {}).items():
        checked_label_key(key)
        if value and not (len(value) <= 63 and _LABEL_NAME.fullmatch(value)):
            raise PydanticCustomError(
                "label_value",
                "the value of {key}, {value}, is no label value: at most 63 letters, digits, "
                "'-', '_' and '.', beginning and ending with a letter or digit",
                {"key": repr(key), "value": repr(value)},
            )
    return labels
