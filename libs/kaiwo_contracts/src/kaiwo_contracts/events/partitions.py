"""Partitions of the workload streams: the partition JetStream files a uid's events under (its
``partition()`` transform, FNV-1a of the uid token) and the stream transform that adds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_contracts.events.subjects import Family, uid_token

# Token index (wildcard number, from 1) of the uid in each partitioned family's source filter.
_PARTITION_SOURCES: dict[Family, tuple[str, int]] = {
    Family.OBSERVED: ("kaiwo.obs.*.*.*", 3),
    Family.PLAN: ("kaiwo.plan.*.*.*", 3),
    Family.RESULT: ("kaiwo.res.*.*.*.*", 4),
    Family.MONITOR: ("kaiwo.mon.*.*.*", 3),
}


@dataclass(frozen=True, slots=True)
class SubjectTransform:
    source: str
    destination: str


def fnv1a_32(data: bytes) -> int:
    """32-bit FNV-1a, the hash JetStream's ``partition()`` transform uses."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def uid_partition(uid: str, partitions: int) -> int:
    """The partition JetStream stores events of ``uid`` in (``{{partition(n, uid)}}``)."""
    return fnv1a_32(uid_token(uid).encode()) % partitions


def stored_subject(subject: str, *, uid: str, partitions: int) -> str:
    """The subject JetStream stores an event of ``uid`` published on ``subject`` under: with
    its partition as one more token when there are several (:func:`partition_transform`)."""
    return subject if partitions <= 1 else f"{subject}.{uid_partition(uid, partitions)}"


def partition_transform(family: Family, partitions: int) -> SubjectTransform | None:
    """The stream transform that appends the uid's partition, or None for one partition."""
    if partitions <= 1:
        return None
    source, uid_index = _PARTITION_SOURCES[family]
    wildcards = source.count("*")
    kept = ".".join(f"{{{{wildcard({index})}}}}" for index in range(1, wildcards + 1))
    prefix = source.split(".*", 1)[0]
    return SubjectTransform(
        source=source,
        destination=f"{prefix}.{kept}.{{{{partition({partitions},{uid_index})}}}}",
    )
