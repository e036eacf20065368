"""Print one line per public workload event (docs/events.md), with nats-py alone.

It connects as the ``subscriber`` identity, which may read ``kaiwo.public.>`` and nothing
else. After ``kaiwo up`` it finds the server and its key in ``.kaiwo/stack.json``
(``KAIWO_STATE_DIR`` for another state directory); elsewhere set ``KAIWO_NATS_URL``,
``KAIWO_NATS_CREDENTIALS_FILE`` (the ``subscriber.nk`` of ``kaiwo nats credentials``) and,
with TLS, ``KAIWO_NATS_TLS_CA_FILE``.

    python examples/subscriber.py [--namespace team-a] [--new]
"""

import argparse
import asyncio
import json
import os
import ssl
from pathlib import Path

import nats
from nats.js.api import DeliverPolicy

EVENT_TYPE = "ai.silogen.kaiwo.public.workload.v1"


def connection() -> tuple[str, str, str | None]:
    url, seed = os.environ.get("KAIWO_NATS_URL"), os.environ.get("KAIWO_NATS_CREDENTIALS_FILE")
    if url and seed:
        return url, seed, os.environ.get("KAIWO_NATS_TLS_CA_FILE")
    state = Path(os.environ.get("KAIWO_STATE_DIR", ".kaiwo")) / "stack.json"
    stack = json.loads(state.read_text())
    return stack["natsUrl"], stack["subscriberCredentialsFile"], stack.get("natsTlsCaFile")


def line(event: dict) -> str:
    workload = event["workload"]
    words = [event["observedAt"], event["transition"], workload["kind"]]
    words += [f"{workload['namespace']}/{workload['name']}", f"phase={event['phase'] or '-'}"]
    if event.get("previousPhase") is not None:
        words.append(f"from={event['previousPhase'] or '-'}")
    words += [f"{key}={event[key]}" for key in ("reason", "user", "queue") if event.get(key)]
    return " ".join(words)


async def main(namespace: str | None, new_only: bool) -> None:
    url, seed, ca = connection()
    tls = ssl.create_default_context(cafile=ca) if ca else None
    nc = await nats.connect(url, nkeys_seed=seed, inbox_prefix="_INBOX.subscriber", tls=tls)
    subject = f"kaiwo.public.workload.{namespace}.>" if namespace else "kaiwo.public.>"
    policy = DeliverPolicy.NEW if new_only else DeliverPolicy.ALL
    # An ordered consumer: every event once, in stream order (so in order per workload).
    sub = await nc.jetstream().subscribe(
        subject, stream="KAIWO_PUBLIC", ordered_consumer=True, deliver_policy=policy
    )
    async for msg in sub.messages:
        headers = {key.lower(): value for key, value in (msg.headers or {}).items()}
        if headers.get("ce-type") == EVENT_TYPE:  # a later version is another type: skip it
            print(line(json.loads(msg.data)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", help="only the workloads of this namespace")
    parser.add_argument("--new", action="store_true", help="only events from now on")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.namespace, arguments.new))
