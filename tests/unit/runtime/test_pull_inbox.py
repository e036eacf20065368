"""The pull requests of one consumer's inbox, against a server played by the test."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kaiwo_runtime.pull_inbox import PullInbox
from nats.aio.msg import Msg


class PlayedServer:
    """A client whose requests the test answers by hand, in the order it chooses."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.asked = asyncio.Event()

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def publish(self, subject: str, payload: bytes, *, reply: str = "") -> None:
        self.requests.append(json.loads(payload))
        self.asked.set()


def status(code: str) -> Msg:
    return Msg(_client=None, subject="_INBOX.test", headers={"Status": code})  # type: ignore[arg-type]


async def test_a_wait_outlives_an_earlier_pulls_request_that_ends_late() -> None:
    """The first pull stops waiting before the server's 408 for its request arrives; a
    message published then goes to no request. The next pull, which may wait 5 s, finds
    that request open, sees it end, and asks again for the time left: it gets the message."""
    server = PlayedServer()
    inbox = PullInbox(server, request_subject="$JS.API.CONSUMER.MSG.NEXT.S.C")  # type: ignore[arg-type]

    probe = asyncio.create_task(inbox.pull(batch=10, wait_seconds=0.2))
    await server.asked.wait()
    await inbox._receive(status("404"))  # the no-wait probe: nothing there
    assert await probe == []
    assert [("no_wait" in r, "expires" in r) for r in server.requests] == [
        (True, False),
        (False, True),
    ]  # the first pull's lingering request is still open: its 408 has not come

    server.asked.clear()
    waiting = asyncio.create_task(inbox.pull(batch=10, wait_seconds=5))
    await asyncio.sleep(0.05)
    assert len(server.requests) == 2  # that open request is waited for, not doubled
    await inbox._receive(status("408"))  # ... and ends, late
    await asyncio.wait_for(server.asked.wait(), 1)
    assert "expires" in server.requests[2]
    assert 4e9 < server.requests[2]["expires"] <= 5e9  # for the time left
    message = Msg(_client=None, subject="_INBOX.test", data=b"{}")  # type: ignore[arg-type]
    await inbox._receive(message)
    assert await asyncio.wait_for(waiting, 1) == [message]


async def test_its_own_request_ending_ends_the_wait() -> None:
    """A lingering request the server refuses (409, too many unacknowledged) is not sent
    again and again for the rest of the wait."""
    server = PlayedServer()
    inbox = PullInbox(server, request_subject="$JS.API.CONSUMER.MSG.NEXT.S.C")  # type: ignore[arg-type]
    inbox._found_empty = True  # looked a moment ago: no probe, one lingering request

    waiting = asyncio.create_task(inbox.pull(batch=10, wait_seconds=5))
    await server.asked.wait()
    await inbox._receive(status("409"))

    assert await asyncio.wait_for(waiting, 1) == []
    assert len(server.requests) == 1
