"""Print one line per public workload event (docs/events.md), with nats-py alone.

It connects as the ``subscriber`` identity, which may read ``kaiwo.public.>`` and nothing
else. After ``kaiwo up`` it finds the server and its key in ``stack.json`` of the state
directory, as the ``kaiwo`` command does: ``$KAIWO_STATE``, else ``.kaiwo`` here or in the
nearest parent directory that has one. Elsewhere set ``KAIWO_NATS_URL``,
``KAIWO_NATS_CREDENTIALS_FILE`` (the ``subscriber.nk`` of ``kaiwo nats credentials``) and,
with TLS, ``KAIWO_NATS_TLS_CA_FILE``.

A key limited to one namespace (``subscriber-team-a.nk`` of ``kaiwo nats credentials
--subscriber-namespace team-a`` or ``kaiwo up --subscriber-namespace team-a``) reads through
its one durable consumer, named after it: ``--own-key`` (with ``kaiwo up``, the key is found
beside the ``subscriber`` one). A second run resumes where the first stopped.

    python examples/subscriber.py [--namespace team-a [--own-key]] [--new]
"""

import argparse
import asyncio
import json
import os
import ssl
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

EVENT_TYPE = "ai.silogen.kaiwo.public.workload.v1"
STREAM = "KAIWO_PUBLIC"


def connection(identity: str) -> tuple[str, str, str | None]:
    url, seed = os.environ.get("KAIWO_NATS_URL"), os.environ.get("KAIWO_NATS_CREDENTIALS_FILE")
    if url and seed:
        return url, seed, os.environ.get("KAIWO_NATS_TLS_CA_FILE")
    stack = json.loads(stack_file().read_text())
    seed = str(Path(stack["subscriberCredentialsFile"]).with_name(f"{identity}.nk"))
    return stack["natsUrl"], seed, stack.get("natsTlsCaFile")


def stack_file() -> Path:
    """``stack.json`` in ``$KAIWO_STATE`` (or ``$KAIWO_STATE_DIR``, which this example read
    before), else in ``.kaiwo`` here or in the nearest parent directory that has one (or
    here, as for the ``kaiwo`` command, docs/cli.md)."""
    variable = next((v for v in ("KAIWO_STATE", "KAIWO_STATE_DIR") if os.environ.get(v)), None)
    here = Path.cwd()
    looked = [here, *(d / ".kaiwo" for d in (here, *here.parents))]
    if variable:
        looked = [Path(os.environ[variable])]
    for directory in looked:
        if (directory / "stack.json").is_file():
            return directory / "stack.json"
    where = f"${variable} ({looked[0]})" if variable else f".kaiwo of {here} or its parents"
    raise SystemExit(
        f"subscriber: no stack.json in {where}: start kaiwo up, export KAIWO_STATE=<its state "
        "directory>, or set KAIWO_NATS_URL and KAIWO_NATS_CREDENTIALS_FILE"
    )


def line(event: dict) -> str:
    workload = event["workload"]
    words = [event["observedAt"], event["transition"], workload["kind"]]
    words += [f"{workload['namespace']}/{workload['name']}", f"phase={event['phase'] or '-'}"]
    if event.get("previousPhase") is not None:
        words.append(f"from={event['previousPhase'] or '-'}")
    words += [f"{key}={event[key]}" for key in ("reason", "user", "queue") if event.get(key)]
    return " ".join(words)


def show(msg: Msg) -> None:
    headers = {key.lower(): value for key, value in (msg.headers or {}).items()}
    if headers.get("ce-type") == EVENT_TYPE:  # a later version is another type: skip it
        print(line(json.loads(msg.data)), flush=True)


async def drop_if_wider(js: JetStreamContext, name: str, subject: str) -> None:
    """Delete the consumer ``name`` if it is filtered to more than ``subject``.

    The ``subscriber`` key (every namespace) is denied a namespace key's consumer only once
    that key is issued. One it made before, filtered wider, would be bound to as it is
    (``pull_subscribe`` checks no filter), and show this key other namespaces' events."""
    try:
        info = await js.consumer_info(STREAM, name)
    except nats.js.errors.NotFoundError:
        return
    if info.config.filter_subject != subject or info.config.filter_subjects:
        await js.delete_consumer(STREAM, name)


async def main(namespace: str | None, new_only: bool, own_key: bool) -> None:
    identity = f"subscriber-{namespace}" if own_key else "subscriber"
    url, seed, ca = connection(identity)
    tls = ssl.create_default_context(cafile=ca) if ca else None
    nc = await nats.connect(url, nkeys_seed=seed, inbox_prefix=f"_INBOX.{identity}", tls=tls)
    subject = f"kaiwo.public.workload.{namespace}.>" if namespace else "kaiwo.public.>"
    policy = DeliverPolicy.NEW if new_only else DeliverPolicy.ALL
    js = nc.jetstream()
    # A pull consumer: every event once, in stream order (so in order per workload),
    # acknowledged when printed. The key's own durable one with --own-key, filtered to its
    # namespace (the only one it may make); else an ephemeral one, named in the create
    # subject (nats-py names it): the subscriber key is refused the create that names no
    # consumer (ordered consumers) while a namespace's key is issued with it (decision 0259).
    try:
        if own_key:
            await drop_if_wider(js, identity, subject)
        pull = await js.pull_subscribe(
            subject,
            durable=identity if own_key else None,
            stream=STREAM,
            config=ConsumerConfig(deliver_policy=policy),
        )
    except nats.errors.TimeoutError:  # the server refuses without an answer
        raise SystemExit(
            f"subscriber: {seed} may not read {subject} through a consumer"
            + (f" {identity} (a namespace's key reads that namespace only)" if own_key else "")
        ) from None
    while True:
        try:
            messages = await pull.fetch(100, timeout=5)
        except nats.errors.TimeoutError:
            continue
        for msg in messages:
            show(msg)
            await msg.ack()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", help="only the workloads of this namespace")
    parser.add_argument("--new", action="store_true", help="only events from now on")
    parser.add_argument(
        "--own-key", action="store_true", help="the key is subscriber-<namespace>'s"
    )
    arguments = parser.parse_args()
    if arguments.own_key and not arguments.namespace:
        parser.error("--own-key needs --namespace")
    asyncio.run(main(arguments.namespace, arguments.new, arguments.own_key))
