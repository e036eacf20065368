"""Send a JSONL file of OpenAI requests through the messenger and write the answers as JSONL,
with nats-py alone (docs/operations.md, "The messenger"; decision 0049).

Each input line is one OpenAI request body (``{"model": "llama", "prompt": "..."}``, or
``messages`` for chat), optionally with an ``"id"`` (else its line number). It is published on
``kaiwo-messenger.<namespace>.requests`` with ``Nats-Msg-Id: <batch>-<id>`` (so sending the
file again within ten minutes stores each request once), and each answer is matched back by
that id. Answers are read through the tenant's durable consumer ``tenant-<namespace>``, so
none is lost while the client is not reading. Run one reader per tenant key at a time:
answers of other batches are acknowledged and skipped. The client gives up after
``--within`` seconds and names how many answers did not come.

Connect with the tenant's key (``kaiwo nats credentials --tenant <namespace>`` writes
``tenant-<namespace>.nk``)::

    KAIWO_NATS_URL=nats://... KAIWO_NATS_CREDENTIALS_FILE=tenant-team-a.nk \\
        python examples/batch_client.py --namespace team-a --input prompts.jsonl \\
        --output answers.jsonl [--path /v1/chat/completions] [--batch nightly-1]

An output line: ``{"id": ..., "status_code": 200, "body": {...}}``; errors come back the same
way, with the status and ``{"error": {...}}``.
"""

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import nats
import nats.errors

RESPONSE_STREAM = "KAIWO_MSG_RES"
PUBLISHES_IN_FLIGHT = 256


def read_requests(path: Path) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        body = json.loads(line)
        identifier = str(body.pop("id", number))
        requests.append((identifier, body))
    return requests


async def send(js: Any, subject: str, batch: str, path: str, requests: list) -> None:
    gate = asyncio.Semaphore(PUBLISHES_IN_FLIGHT)

    async def one(identifier: str, body: dict[str, Any]) -> None:
        message = {"metadata": {"batch": batch, "id": identifier}, "path": path, "body": body}
        async with gate:
            await js.publish(
                subject,
                json.dumps(message).encode(),
                headers={"Nats-Msg-Id": f"{batch}-{identifier}"},
            )

    await asyncio.gather(*(one(identifier, body) for identifier, body in requests))


async def receive(js: Any, namespace: str, batch: str, wanted: set[str], output: Path) -> None:
    """Write each wanted answer once, taking it out of ``wanted``."""
    key = f"tenant-{namespace}"
    subscription = await js.pull_subscribe(
        f"kaiwo-messenger.{namespace}.responses", durable=key, stream=RESPONSE_STREAM
    )
    with output.open("a") as out:
        while wanted:
            with contextlib.suppress(nats.errors.TimeoutError, TimeoutError):
                for message in await subscription.fetch(min(len(wanted), 256), timeout=5):
                    answer = json.loads(message.data)
                    metadata = answer.get("metadata") or {}
                    identifier = str(metadata.get("id"))
                    if metadata.get("batch") == batch and identifier in wanted:
                        wanted.discard(identifier)
                        record = {
                            "id": identifier,
                            "status_code": answer["status_code"],
                            "body": answer["body"],
                        }
                        out.write(json.dumps(record) + "\n")
                    await message.ack()
            out.flush()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", required=True, help="The tenant (the Models' namespace).")
    parser.add_argument("--input", type=Path, required=True, help="JSONL of request bodies.")
    parser.add_argument("--output", type=Path, required=True, help="JSONL answers (appended).")
    parser.add_argument("--path", default="/v1/completions", help="The OpenAI route.")
    parser.add_argument("--batch", default=None, help="Batch id (default: a new one).")
    parser.add_argument("--within", type=float, default=3600.0, help="Seconds to wait in all.")
    arguments = parser.parse_args()

    url = os.environ["KAIWO_NATS_URL"]
    seed = os.environ["KAIWO_NATS_CREDENTIALS_FILE"]
    ca = os.environ.get("KAIWO_NATS_TLS_CA_FILE")
    key = f"tenant-{arguments.namespace}"
    client = await nats.connect(
        url,
        nkeys_seed=seed,
        inbox_prefix=f"_INBOX.{key}",
        tls=ssl.create_default_context(cafile=ca) if ca else None,
        name=f"batch-{key}",
    )
    js = client.jetstream(timeout=10)
    batch = arguments.batch or uuid.uuid4().hex[:12]
    requests = read_requests(arguments.input)
    wanted = {identifier for identifier, _ in requests}
    started = time.monotonic()
    try:
        subject = f"kaiwo-messenger.{arguments.namespace}.requests"
        await send(js, subject, batch, arguments.path, requests)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                receive(js, arguments.namespace, batch, wanted, arguments.output),
                arguments.within,
            )
    finally:
        await client.close()
    seconds = time.monotonic() - started
    answered = len(requests) - len(wanted)
    sys.stderr.write(
        f"batch {batch}: {answered} answers in {seconds:.1f} s "
        f"({answered / max(seconds, 1e-9):.0f}/s); {len(wanted)} missing\n"
    )
    return 0 if not wanted else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
