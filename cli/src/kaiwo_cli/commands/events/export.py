"""``kaiwo events export``: recorded events as CloudEvents JSON lines (structured mode) with
their recorded positions as extension attributes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Any, Final

import typer
from kaiwo_contracts.events.envelope import Envelope, EnvelopeFormatError, RawPayload
from kaiwo_eventstore import StoredEvent
from kaiwo_eventstore.explain import (
    find_workload,
    workload_events,
)
from pydantic import ValidationError

from kaiwo_cli.commands.events.store_access import (
    StateDirOption,
    StoreOption,
    name_the_cluster,
    opened_store,
    run_coroutine,
    store_url,
)

EXTENSION_POSITION: Final = "kaiwoposition"


EXTENSION_STREAM: Final = "kaiwostreamid"


EXTENSION_VERSION: Final = "kaiwostreamversion"


EXTENSION_RECORDED_AT: Final = "kaiworecordedat"


def export(
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="Only this workload (NAMESPACE/NAME, KIND/NAMESPACE/NAME, or its uid).",
        ),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Events at or after this time (ISO 8601; UTC if no zone).")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Events before this time (ISO 8601).")] = None,
    event_type: Annotated[
        list[str] | None,
        typer.Option("--type", help="Only these CloudEvents types (repeatable)."),
    ] = None,
    store: StoreOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """Recorded events as JSON lines (CloudEvents structured mode) with their positions."""
    name_the_cluster(store, state_dir)
    lines: list[str] = run_coroutine(
        _export(workload, since, until, tuple(event_type or ()), store_url(store, state_dir))
    )
    for line in lines:
        typer.echo(line)


async def _export(
    reference: str | None,
    since: str | None,
    until: str | None,
    types: tuple[str, ...],
    url: str,
) -> list[str]:
    start = parse_time(since, option="--since") if since else None
    end = parse_time(until, option="--until") if until else None
    async with opened_store(url) as store:
        if reference:
            uid = (await find_workload(store, reference)).uid
            events: Iterable[StoredEvent] = await workload_events(store, uid)
        elif types:
            events = await store.read_by_type(types)
        elif start is not None or end is not None:
            events = await store.read_by_time(
                start or datetime.min.replace(tzinfo=UTC), end or datetime.max.replace(tzinfo=UTC)
            )
        else:
            events = [e async for batch in store.iter_all() for e in batch]
    selected = (
        event
        for event in events
        if (not types or event.type in types)
        and (start is None or event.time >= start)
        and (end is None or event.time < end)
    )
    return [json.dumps(structured(event), sort_keys=True, ensure_ascii=False) for event in selected]


def parse_time(text: str, *, option: str) -> datetime:
    """``text`` as a time (UTC when it names no zone); a ValueError naming ``option`` and
    the form it takes when it is none (Python's own says only "Invalid isoformat string")."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        msg = f"{option}: {text!r} is not an ISO 8601 time (e.g. 2026-12-06T10:00:00Z)"
        raise ValueError(msg) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def structured(event: StoredEvent) -> dict[str, Any]:
    """The CloudEvents structured form of a recorded event, plus where it was recorded."""
    attributes: dict[str, Any] = {
        "id": event.event_id,
        "source": event.source,
        "type": event.type,
        "subject": event.subject,
        "time": event.time,
        "correlationid": event.correlation_id,
        "causationid": event.causation_id,
        "traceparent": event.metadata.get("traceparent"),
        "data": event.data,
    }
    try:
        document = Envelope[RawPayload].model_validate(attributes).to_structured()
    except (ValidationError, EnvelopeFormatError):
        # A raw record (malformed message) keeps its attributes as recorded.
        document = {key: value for key, value in attributes.items() if value is not None}
        document |= {"specversion": "1.0", "datacontenttype": "application/json"}
        document["time"] = event.time.isoformat()
    document[EXTENSION_POSITION] = event.global_position
    document[EXTENSION_STREAM] = event.stream_id
    document[EXTENSION_VERSION] = event.stream_version
    document[EXTENSION_RECORDED_AT] = event.recorded_at.isoformat()
    return document
