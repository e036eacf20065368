"""Which owner a published-plan record or a timer belongs to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_PREFIX: Final = "default/"


@dataclass(frozen=True, slots=True, order=True)
class OwnerKey:
    """An owner the planner keeps a record for: one with a uid, or the default singleton of a
    kind the cluster lacks (the KaiwoConfig and KaiwoQueueConfig ``kaiwo``, which has no uid
    until it is created). Exactly one of the two is set."""

    uid: str = ""
    default_kind: str = ""

    @classmethod
    def of_uid(cls, uid: str) -> OwnerKey:
        return cls(uid=uid)

    @classmethod
    def default(cls, kind: str) -> OwnerKey:
        return cls(default_kind=kind)

    @property
    def is_default(self) -> bool:
        return bool(self.default_kind)

    @property
    def subject_uid(self) -> str:
        """The uid token its plans are published under (and partitioned by): the owner's uid,
        or for a default singleton the stand-in its plan's subject carries."""
        return f"default-{self.default_kind}".lower() if self.is_default else self.uid

    def to_document(self) -> str:
        """The key in a snapshot: the uid, or ``default/<Kind>`` (the format since 0029)."""
        return f"{DEFAULT_PREFIX}{self.default_kind}" if self.is_default else self.uid

    @classmethod
    def from_document(cls, text: str) -> OwnerKey:
        if text.startswith(DEFAULT_PREFIX):
            return cls.default(text.removeprefix(DEFAULT_PREFIX))
        return cls.of_uid(text)
