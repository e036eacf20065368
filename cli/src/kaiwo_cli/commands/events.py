"""``kaiwo events``: read what the operator saw, decided and did.

* ``tail``    — live events from NATS, optionally after the recorded ones: those that carry
  no object (public workload events, results, findings, the gateway's), which the CLI's key
  may read; ``--internal`` adds observations, plans and dead letters (``kaiwo.>``), for a
  key that may read them (a reader's, ``kaiwo nats credentials --reader``);
* ``replay``  — re-run the pure planner over the recorded observations and check every
  recorded plan of a workload is reproduced byte for byte (exit 1 when one differs);
* ``explain`` — a workload's story: each observation, the plan it caused, what the executor
  did, monitor findings and preemptions, as a tree;
* ``export``  — recorded events as CloudEvents JSON lines (structured mode) with their
  recorded positions as extension attributes.

``--store`` defaults to the event store of the stack ``kaiwo up`` started in the state
directory (``--state``, ``$KAIWO_STATE``, else ``.kaiwo`` here or in a parent directory; its
``stack.json``), else the SQLite file ``kaiwo up`` keeps there.
``tail`` connects to that stack's NATS with the CLI's own read-only identity; given
``--nats`` it connects there instead, with ``--credentials`` (an NKey seed or ``.creds``
file) and ``--tls-ca`` as needed. It never guesses a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from kaiwo_contracts.events.decoding import decode_event
from kaiwo_contracts.events.envelope import Envelope, EnvelopeFormatError, RawPayload
from kaiwo_contracts.events.permissions import CLI, CLI_SUBJECTS, inbox_prefix
from kaiwo_eventstore import EventStore, StoredEvent, open_event_store
from kaiwo_eventstore.explain import (
    WorkloadNotFoundError,
    causal_forest,
    describe,
    find_workload,
    short_plan_id,
    tree_lines,
    workload_events,
)
from kaiwo_runtime.nats_connection import (
    CONNECT_ERRORS,
    ClientTls,
    NatsConnection,
    connect_client,
)
from kaiwo_runtime.redaction import redact_secrets, redact_url
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from kaiwo_cli.replay.comparison import PlanReplay, ReplayReport
from kaiwo_cli.replay.store import replay_from_store
from kaiwo_cli.stack.cluster_state import recorded_cluster
from kaiwo_cli.stack.state import (
    StackState,
    StackStateError,
    read_state_if_any,
    state_dir_here,
)
from kaiwo_cli.tail_lines import (
    TailFilter,
    change_and_phase,
    display_kind,
    kind_of,
    tail_line,
)

EXTENSION_POSITION: Final = "kaiwoposition"
EXTENSION_STREAM: Final = "kaiwostreamid"
EXTENSION_VERSION: Final = "kaiwostreamversion"
EXTENSION_RECORDED_AT: Final = "kaiworecordedat"
EXPLAIN_WIDTH: Final = 120
"""Columns to wrap ``explain`` at when the output is no terminal and COLUMNS is unset."""

app = typer.Typer(
    name="events",
    help="Read the recorded events: tail, replay, explain, export.",
    no_args_is_help=True,
)

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Event store URL (as the recorder's KAIWO_EVENTSTORE_URL); default: the one "
        "kaiwo up uses in --state-dir.",
    ),
]
StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state",
        "--state-dir",
        envvar="KAIWO_STATE",
        help="Where kaiwo up keeps its state (stack.json); default: .kaiwo here or in a parent "
        "directory.",
    ),
]


class CommandError(RuntimeError):
    """A problem to report in one line (exit code 2)."""


def _stdout() -> Console:
    # Created per call so the width follows the environment (COLUMNS) of this invocation.
    return Console(highlight=False, soft_wrap=True)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _fail(error: Exception) -> typer.Exit:
    _stderr().print(f"kaiwo events: {escape(str(error))}", style="red")
    return typer.Exit(2)


# --------------------------------------------------------------------------- the store


def sqlite_file(url: str) -> Path | None:
    scheme, separator, rest = url.partition(":///")
    if not separator or not scheme.startswith("sqlite"):
        return None
    path = rest.partition("?")[0]
    return Path(path) if path and path != ":memory:" else None


@contextlib.asynccontextmanager
async def opened_store(url: str) -> AsyncIterator[EventStore]:
    """The store at ``url`` for reading; a missing SQLite file is an error, not a new store."""
    database = sqlite_file(url)
    if database is not None and not database.is_file():
        raise CommandError(f"no event store at {database} (is the recorder running? --store)")
    try:
        store = await open_event_store(url, migrate=False)
    except Exception as error:  # a driver error in any form: one line for the user
        raise CommandError(
            f"cannot open the event store {redact_url(url)}: {redact_secrets(str(error))}"
        ) from error
    try:
        yield store
    finally:
        await store.close()


def _run(coroutine: Any) -> Any:
    try:
        return asyncio.run(coroutine)
    except (CommandError, WorkloadNotFoundError, ValueError) as error:
        raise _fail(error) from None


def store_url(given: str | None, state_dir: Path | None) -> str:
    """``--store``, else the store of the stack in the state directory, else the SQLite file
    ``kaiwo up`` would keep there."""
    if given:
        return given
    directory = state_dir_here(state_dir)
    try:
        return StackState.read(directory).event_store_url
    except StackStateError:
        return f"sqlite:///{directory / 'events.db'}"


def cluster_of(given_store: str | None, state_dir: Path | None) -> str | None:
    """The cluster (uid of its kube-system) whose events the store holds, when known: that of
    the stack in the state directory, for its own store (decision 0042)."""
    directory = state_dir_here(state_dir)
    state = read_state_if_any(directory)
    if state is not None and state.cluster_uid and given_store in (None, state.event_store_url):
        return state.cluster_uid
    if given_store is None or sqlite_file(given_store) == directory / "events.db":
        return recorded_cluster(directory)
    return None


def name_the_cluster(given_store: str | None, state_dir: Path | None) -> None:
    """One line on stderr naming the cluster of what the command shows, when it is known
    (stdout stays the command's own: JSON lines, a tree): the stack's, or the one a store
    given by URL records (decision 0042)."""
    cluster = cluster_of(given_store, state_dir)
    if cluster is None and given_store is not None:
        cluster = asyncio.run(recorded_by_store(given_store))
    if cluster is not None:
        typer.echo(f"kaiwo events: cluster {cluster} (uid of its kube-system namespace)", err=True)


async def recorded_by_store(url: str) -> str | None:
    """The cluster the store at ``url`` records; None when it records none or cannot be read
    (the command opens it again and says what is wrong)."""
    try:
        async with opened_store(url) as store:
            return await store.cluster()
    except Exception:  # a missing file, a driver error, a store of an older schema
        return None


def tail_connection(
    *, nats_url: str | None, credentials: Path | None, tls_ca: Path | None, state_dir: Path | None
) -> NatsConnection:
    """``--nats`` with its credentials, or the CLI identity of the stack in the state
    directory; never a guessed server."""
    if nats_url is None:
        try:
            state = StackState.read(state_dir_here(state_dir))
        except StackStateError as error:
            raise CommandError(str(error)) from error
        nats_url = state.nats_url
        credentials = credentials or state.cli_credentials_file
        tls_ca = tls_ca or state.nats_tls_ca_file
    return NatsConnection(
        url=nats_url,
        credentials_file=credentials,
        tls=ClientTls(ca_file=tls_ca) if tls_ca else None,
        inbox_prefix=inbox_prefix(CLI),
        name="kaiwo-events-tail",
    )


# --------------------------------------------------------------------------- explain


@app.command("explain")
def explain(
    workload: Annotated[
        str,
        typer.Argument(
            help="The workload, as NAMESPACE/NAME, or one of its children as KIND/NAMESPACE/NAME "
            "(Job/ml-team/train-download)."
        ),
    ],
    store: StoreOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """How a workload got where it is: observations, plans, results and preemptions."""
    name_the_cluster(store, state_dir)
    _run(_explain(workload, store_url(store, state_dir)))


async def _explain(reference: str, url: str) -> None:
    async with opened_store(url) as store:
        identity = await find_workload(store, reference)
        events = await workload_events(store, identity.uid)
    title = (
        f"{identity.kind} {identity.namespace}/{identity.name} (uid {identity.uid}) — "
        f"{len(events)} recorded events"
    )
    if identity.via:
        title = f"{identity.via} belongs to {title}"
    width = shutil.get_terminal_size((EXPLAIN_WIDTH, 24)).columns
    lines = tree_lines(
        title,
        causal_forest(events),
        label=lambda event: f"{_clock(event.time)}  {describe(event)}",
        width=width,
    )
    typer.echo("\n".join(lines))


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


# --------------------------------------------------------------------------- replay


@app.command("replay")
def replay(
    workload: Annotated[
        str | None,
        typer.Option("--workload", help="NAMESPACE/NAME; every recorded plan when omitted."),
    ] = None,
    fresh_contexts: Annotated[
        bool,
        typer.Option(
            "--fresh-contexts",
            help="Work every value out afresh for each plan (slower; also finds a value the "
            "planner kept when it should have worked it out again).",
        ),
    ] = False,
    store: StoreOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """Re-plan from the recorded observations; exit 1 when a recorded plan is not reproduced."""
    name_the_cluster(store, state_dir)
    console = _stdout()
    report: ReplayReport = _run(
        _replay(
            workload,
            store_url(store, state_dir),
            lambda plan: _print_verdict(console, plan),
            fresh_contexts=fresh_contexts,
        )
    )
    total = report.reproduced + report.differ + report.skipped
    console.print(
        f"{total} plans, {report.reproduced} reproduced, {report.differ} differ, "
        f"{report.skipped} skipped ({report.observations} observations replayed)"
    )
    if report.late_observations:
        console.print(
            f"[yellow]{report.late_observations} observations were recorded after the replay "
            "had passed their stream sequence and were not applied[/]"
        )
    if report.differ:
        raise typer.Exit(1)


def _print_verdict(console: Console, plan: PlanReplay) -> None:
    """One line per plan as it is judged (a large store prints as it goes, keeping none)."""
    mark = {"reproduced": "[green]reproduced[/]", "differs": "[red]differs[/]"}.get(
        plan.outcome, "[yellow]skipped[/]"
    )
    console.print(
        f"{mark}  {escape(plan.owner)}  plan {short_plan_id(plan.event_id)} "
        f"({plan.trigger}, obs {plan.obs_sequence})"
        + (f": {escape(plan.reason)}" if plan.reason else "")
    )
    if plan.diff:
        console.print(Syntax(plan.diff, "diff", theme="ansi_dark", background_color="default"))


async def _replay(
    reference: str | None,
    url: str,
    on_verdict: Callable[[PlanReplay], None],
    *,
    fresh_contexts: bool,
) -> ReplayReport:
    async with opened_store(url) as store:
        uid = (await find_workload(store, reference)).uid if reference else None
        return await replay_from_store(
            store,
            workload_uid=uid,
            on_verdict=on_verdict,
            keep=lambda _plan: False,
            fresh_contexts=fresh_contexts,
        )


# --------------------------------------------------------------------------- export


@app.command("export")
def export(
    workload: Annotated[
        str | None, typer.Option("--workload", help="Only this workload (NAMESPACE/NAME).")
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
    lines: list[str] = _run(
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
    start = parse_time(since) if since else None
    end = parse_time(until) if until else None
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


def parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
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


# --------------------------------------------------------------------------- tail


@app.command("tail")
def tail(
    *,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n")] = None,
    name: Annotated[str | None, typer.Option()] = None,
    kind: Annotated[str | None, typer.Option(help="KaiwoJob, Pod, Node, ...")] = None,
    event_type: Annotated[
        str | None, typer.Option("--type", help="Type, or part of it: plan.decided")
    ] = None,
    from_store: Annotated[
        bool, typer.Option("--from-store", help="Print the recorded events first.")
    ] = False,
    count: Annotated[
        int | None, typer.Option(help="Stop after this many live events.", min=1)
    ] = None,
    nats_url: Annotated[
        str | None,
        typer.Option("--nats", help="NATS URL; default: the one kaiwo up runs (stack.json)."),
    ] = None,
    credentials: Annotated[
        Path | None,
        typer.Option(help="NKey seed or .creds file for --nats (default: kaiwo up's CLI key)."),
    ] = None,
    tls_ca: Annotated[
        Path | None, typer.Option("--tls-ca", help="CA to verify a TLS server with.")
    ] = None,
    internal: Annotated[
        bool,
        typer.Option(
            "--internal",
            help="Also observations, plans and dead letters (whole objects): needs a key that "
            "may read them, a reader's (kaiwo nats credentials --reader); the CLI's may not.",
        ),
    ] = False,
    store: StoreOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """Follow events live from NATS (Ctrl-C stops)."""
    name_the_cluster(store, state_dir)
    wanted = TailFilter(namespace=namespace, name=name, kind=kind, type=event_type)
    _run(
        _tail(
            wanted,
            connection_of=lambda: tail_connection(
                nats_url=nats_url, credentials=credentials, tls_ca=tls_ca, state_dir=state_dir
            ),
            store_url=store_url(store, state_dir),
            from_store=from_store,
            count=count,
            subjects=TAIL_ALL if internal else CLI_SUBJECTS,
        )
    )


TAIL_ALL: Final = ("kaiwo.>",)
"""``tail --internal``: every event, the internal families included."""


async def _tail(
    wanted: TailFilter,
    *,
    connection_of: Callable[[], NatsConnection],
    store_url: str,
    from_store: bool,
    count: int | None,
    subjects: tuple[str, ...] = CLI_SUBJECTS,
) -> None:
    console = _stdout()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    connection = connection_of()
    try:
        client = await connect_client(connection, connect_timeout=5, max_reconnect_attempts=3)
    except CONNECT_ERRORS as error:
        raise CommandError(
            f"NATS at {connection.redacted_url} is unreachable: {redact_secrets(str(error))}"
        ) from error
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Not on every platform, and only in the main thread.
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        # Subscribe before reading the store, so nothing falls between the two.
        for subject in subjects:
            await client.subscribe(subject, cb=queue.put)
        seen: set[str] = set()
        if from_store:
            async with opened_store(store_url) as opened:
                async for batch in opened.iter_all():
                    for event in batch:
                        seen.add(event.event_id)
                        _print_stored(console, event, wanted)
        printed = 0
        while not stop.is_set() and (count is None or printed < count):
            getter = asyncio.ensure_future(queue.get())
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            for pending in (getter, stopper):
                if pending not in done:
                    pending.cancel()
            if getter not in done:
                break
            message = getter.result()
            printed += _print_live(console, message, wanted, seen)
    finally:
        await client.close()


def _print_stored(console: Console, event: StoredEvent, wanted: TailFilter) -> None:
    kind = kind_of(event.metadata.get("natsSubject"), event.data)
    if wanted.matches(event_type=event.type, subject=event.subject, kind=kind):
        change, phase = change_and_phase(event.type, event.data)
        console.print(
            escape(
                tail_line(
                    time=event.time,
                    event_type=event.type,
                    kind=display_kind(event.metadata.get("natsSubject"), event.data),
                    subject=event.subject,
                    change=change,
                    phase=phase,
                    event_id=event.event_id,
                    correlation_id=event.correlation_id,
                    causation_id=event.causation_id,
                )
            ),
            style="dim",
        )


def _print_live(console: Console, message: Any, wanted: TailFilter, seen: set[str]) -> int:
    try:  # the decoder every consumer uses: poison here is poison for the services too
        decoded = decode_event(message.headers, message.data, subject=message.subject)
    except EnvelopeFormatError as error:
        if wanted == TailFilter():
            console.print(escape(f"(unreadable message on {message.subject}: {error})"))
            return 1
        return 0
    envelope = decoded.envelope
    if envelope.id in seen:
        return 0
    seen.add(envelope.id)
    data = decoded.body
    kind = kind_of(message.subject, data)
    if not wanted.matches(event_type=envelope.type, subject=envelope.subject, kind=kind):
        return 0
    change, phase = change_and_phase(envelope.type, data)
    console.print(
        escape(
            tail_line(
                time=envelope.time,
                event_type=envelope.type,
                kind=display_kind(message.subject, data),
                subject=envelope.subject,
                change=change,
                phase=phase,
                event_id=envelope.id,
                correlation_id=envelope.correlationid,
                causation_id=envelope.causationid,
            )
        )
    )
    return 1
