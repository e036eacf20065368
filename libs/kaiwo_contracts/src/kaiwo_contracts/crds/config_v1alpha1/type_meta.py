"""What the top-level kinds of the config group share: apiVersion and kind always on the wire."""

from __future__ import annotations

from typing import Self

from pydantic import model_validator

from kaiwo_contracts.crds.base import KubeModel


class TypedObject(KubeModel):
    """A top-level object whose ``apiVersion`` and ``kind`` are sent even when left to default.

    ``to_wire()`` only dumps fields that were set; an object built in Python would otherwise go
    out without its type, which no API server accepts.
    """

    @model_validator(mode="after")
    def _always_send_type_meta(self) -> Self:
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        return self
