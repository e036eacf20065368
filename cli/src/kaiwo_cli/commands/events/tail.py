"""``kaiwo events tail``: live events from NATS, optionally after the recorded ones."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from kaiwo_contracts.events.decoding import decode_event
from kaiwo_contracts.events.envelope import EnvelopeFormatError
from kaiwo_contracts.events.permissions import CLI, CLI_SUBJECTS, LIVE_EVENTS, inbox_prefix
from kaiwo_contracts.events.subjects import stored_subject
from kaiwo_eventstore import StoredEvent
from kaiwo_runtime.nats_connection import (
    CONNECT_ERRORS,
    ClientTls,
    NatsConnection,
    connect_client,
    flush_written,
)
from kaiwo_runtime.redaction import redact_secrets
from rich.console import Console
from rich.markup import escape

from kaiwo_cli.commands.events.store_access import (
    CommandError,
    StateDirOption,
    StoreOption,
    name_the_cluster,
    opened_store,
    run_coroutine,
    stdout_console,
    store_url,
)
from kaiwo_cli.stack.state import (
    StackState,
    StackStateError,
    state_dir_here,
)
from kaiwo_cli.tail_lines import (
    TailFilter,
    change_and_phase,
    display_kind,
    kind_of,
    tail_line,
)


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
    run_coroutine(
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


TAIL_ALL: Final = (LIVE_EVENTS,)
"""``tail --internal``: every event, the internal families included (live: as the streams
republish what they store, decision 0287)."""


async def _tail(
    wanted: TailFilter,
    *,
    connection_of: Callable[[], NatsConnection],
    store_url: str,
    from_store: bool,
    count: int | None,
    subjects: tuple[str, ...] = CLI_SUBJECTS,
) -> None:
    console = stdout_console()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    connection = connection_of()
    refusals = Refusals()
    lost = asyncio.Event()

    async def closed() -> None:
        lost.set()

    try:
        client = await connect_client(
            connection,
            connect_timeout=5,
            max_reconnect_attempts=3,
            error_cb=refusals.note,
            closed_cb=closed,
        )
    except CONNECT_ERRORS as error:
        raise CommandError(
            f"NATS at {connection.redacted_url} is unreachable: {refusals.last_error_or(error)}"
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
        # The server refuses a subscription with an error before it answers the flush's
        # ping, and keeps the connection: without this, tail waited for good on nothing.
        try:
            await flush_written(client, seconds=5)
        except CONNECT_ERRORS as error:
            raise CommandError(
                f"NATS at {connection.redacted_url} did not answer: {redact_secrets(str(error))}"
            ) from error
        refusals.check(connection, subjects)
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
            refused = asyncio.ensure_future(refusals.any.wait())
            gone = asyncio.ensure_future(lost.wait())
            done, _ = await asyncio.wait(
                {getter, stopper, refused, gone}, return_when=asyncio.FIRST_COMPLETED
            )
            for pending in (getter, stopper, refused, gone):
                if pending not in done:
                    pending.cancel()
            refusals.check(connection, subjects)
            if gone in done and getter not in done:
                # nats-py gave up reconnecting and closed the client: nothing more comes.
                raise CommandError(
                    f"NATS at {connection.redacted_url} was lost and did not come back: "
                    f"{refusals.last_error_or(None)}"
                )
            if getter not in done:
                break
            message = getter.result()
            printed += _print_live(console, message, wanted, seen)
    finally:
        await client.close()


_REFUSED_SUBSCRIPTION: Final = re.compile(r'permissions violation for subscription to "([^"]+)"')


class Refusals:
    """The subjects the server refused this key (nats-py hands them to its error callback;
    the default callback only logged them), and the last other error it handed over."""

    def __init__(self) -> None:
        self.subjects: list[str] = []
        self.any = asyncio.Event()
        self.last_error: Exception | None = None

    async def note(self, error: Exception) -> None:
        found = _REFUSED_SUBSCRIPTION.search(str(error).lower())
        if found is None:
            # Kept for the one line tail ends with, should the connection not come back:
            # nats-py's own callback printed a traceback at every attempt (decision 0240).
            self.last_error = error
            return
        self.subjects.append(found.group(1))
        self.any.set()

    def last_error_or(self, error: Exception | None) -> str:
        """The last error nats-py told of, else ``error``, in one line, secrets masked: the
        connection's own (``Connect call failed``) says more than nats-py's summary
        (``no servers available for connection``)."""
        told = self.last_error or error
        if told is None:
            return "no reason given"
        return redact_secrets(" ".join(str(told).split()) or type(told).__name__)

    def check(self, connection: NatsConnection, subjects: tuple[str, ...]) -> None:
        """One line naming the key, what it may not read and which key would (exit 2)."""
        if not self.subjects:
            return
        key = connection.credentials_file
        who = f"the key {key}" if key else "the user of the URL"
        if connection.anonymous:
            who = "a connection without a key"
        refused = ", ".join(self.subjects)
        if subjects == TAIL_ALL:
            which = (
                "--internal takes a reader's key (kaiwo nats credentials --out DIR --keep "
                "--reader NAME writes DIR/NAME.nk), given with --credentials; without "
                "--internal the CLI's key reads the events that carry no object"
            )
        else:
            which = (
                "tail takes the CLI's key (kaiwo up's, found without flags; cli.nk of kaiwo "
                "nats credentials) or a reader's, given with --credentials"
            )
        raise CommandError(f"NATS refused: {who} may not read {refused}; {which}")


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
    subject = _stored_subject(message)
    try:  # the decoder every consumer uses: poison here is poison for the services too
        decoded = decode_event(message.headers, message.data, subject=subject)
    except EnvelopeFormatError as error:
        if wanted == TailFilter():
            console.print(escape(f"(unreadable message on {subject}: {error})"))
            return 1
        return 0
    envelope = decoded.envelope
    if envelope.id in seen:
        return 0
    seen.add(envelope.id)
    data = decoded.body
    kind = kind_of(subject, data)
    if not wanted.matches(event_type=envelope.type, subject=envelope.subject, kind=kind):
        return 0
    change, phase = change_and_phase(envelope.type, data)
    console.print(
        escape(
            tail_line(
                time=envelope.time,
                event_type=envelope.type,
                kind=display_kind(subject, data),
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


STORED_SUBJECT_HEADER: Final = "Nats-Subject"


def _stored_subject(message: Any) -> str:
    """The subject the event was stored under: a stream republishes it live with that
    subject in its ``Nats-Subject`` header (the partition token included)."""
    headers = message.headers or {}
    return str(headers.get(STORED_SUBJECT_HEADER) or stored_subject(message.subject))
