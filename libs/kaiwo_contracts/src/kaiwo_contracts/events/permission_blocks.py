"""The pieces every NATS permission set is built of: the :class:`Permissions` and
:class:`Identity` types, and the JetStream API subjects that grant one ability each (read a
stream's info or a stored message, pull from and settle a durable consumer, open and use a
key-value bucket). :mod:`kaiwo_contracts.events.permissions` composes them per identity."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kaiwo_contracts.events.streams import ConsumerSpec

JS_API = "$JS.API"
JS_ACK = "$JS.ACK"
JS_FLOW_CONTROL = "$JS.FC"
KV_PREFIX = "$KV"
INBOX_ROOT = "_INBOX"
EVERYTHING = ">"
IDENTITY_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Permissions:
    """Subjects an identity may publish to and subscribe to; nothing else is allowed.

    An empty ``publish`` means no publish at all (rendered as a deny of everything: NATS
    reads a missing list as "anything"). ``publish_denied`` carves subjects out of what
    ``publish`` allows (the server's ``deny``, which wins over ``allow``): the consumers of
    other keys among those a wildcard grants (decision 0259)."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    publish_denied: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Identity:
    """One NATS user: a name, what it is for, what it may do, and what it relies on."""

    name: str
    description: str
    permissions: Permissions
    streams: tuple[str, ...] = ()
    """Streams it publishes into or reads (they must exist before it starts)."""
    consumers: tuple[str, ...] = ()
    """Durable consumers it reads (declared by the administrator)."""

    @property
    def inbox_prefix(self) -> str:
        return inbox_prefix(self.name)


def inbox_prefix(name: str) -> str:
    """``_INBOX.<name>``: where replies to ``name``'s requests and its deliveries arrive."""
    return f"{INBOX_ROOT}.{checked_name(name)}"


def checked_name(name: str) -> str:
    if not IDENTITY_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not an identity name (a DNS label: [a-z0-9-])")
    return name


def api(*tokens: str) -> str:
    return ".".join((JS_API, *tokens))


def stream_info(streams: Iterable[str]) -> tuple[str, ...]:
    return tuple(api("STREAM", "INFO", stream) for stream in streams)


def stored_reads(stream: str) -> tuple[str, ...]:
    """Read a stored message by sequence (plain or direct get)."""
    return (
        api("STREAM", "MSG", "GET", stream),
        api("DIRECT", "GET", stream),
        api("DIRECT", "GET", stream, EVERYTHING),
    )


def consuming(spec: ConsumerSpec, *, dead_letters: bool = True) -> tuple[str, ...]:
    """Pull from one durable consumer, settle its messages and dead-letter them."""
    found = (
        api("CONSUMER", "INFO", spec.stream, spec.durable_name),
        api("CONSUMER", "MSG", "NEXT", spec.stream, spec.durable_name),
        f"{JS_ACK}.{spec.stream}.{spec.durable_name}.{EVERYTHING}",
    )
    return (*found, spec.dead_letter_subject) if dead_letters else found


def bucket(bucket: str, *, keys: Iterable[str] = (EVERYTHING,)) -> tuple[str, ...]:
    """Open (creating when missing), read, list and write ``keys`` of a key-value bucket."""
    stream = f"KV_{bucket}"
    return (
        api("STREAM", "INFO", stream),
        api("STREAM", "CREATE", stream),
        *stored_reads(stream),  # listing the keys too: the stream read by sequence
        *(f"{KV_PREFIX}.{bucket}.{key}" for key in keys),
    )


def reading_bucket(bucket: str) -> tuple[str, ...]:
    """Open another service's key-value bucket and read its keys; nothing else (the watcher's,
    for the cluster identity it records: decision 0042)."""
    stream = f"KV_{bucket}"
    return (api("STREAM", "INFO", stream), *stored_reads(stream))


def lease_keys(role: str, partitions: int) -> tuple[str, ...]:
    """The lease ``role`` and, with partitions, every ``<role>.p<k>`` and ``<role>.member.*``
    entry (``<role>.>``; :mod:`kaiwo_runtime.partition_leases`)."""
    return (role, f"{role}.{EVERYTHING}") if partitions > 1 else (role,)


def unique(*groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(subject for group in groups for subject in group))


def service(
    name: str,
    description: str,
    *,
    publish: Iterable[str],
    streams: tuple[str, ...],
    consumers: tuple[ConsumerSpec, ...] = (),
    subscribe: Iterable[str] = (),
) -> Identity:
    return Identity(
        name=name,
        description=description,
        permissions=Permissions(
            publish=unique(publish),
            subscribe=(f"{inbox_prefix(name)}.{EVERYTHING}", *subscribe),
        ),
        streams=streams,
        consumers=tuple(spec.durable_name for spec in consumers),
    )
