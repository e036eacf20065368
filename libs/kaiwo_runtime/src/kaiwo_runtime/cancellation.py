"""Cancellations that a library lost on the way, raised again where a loop goes round.

Two ways a cancelled task carries on as if nothing happened, both seen in CI as a service
whose stop timed out:

* aiohttp can answer a cancelled stream read with ``RuntimeError("Connection closed.")``,
  which a retry loop takes for a dropped connection;
* Python 3.11's ``asyncio.wait_for`` (inside every nats-py request: a JetStream publish, a
  key-value write) returns the reply when it arrives together with the cancellation, so
  nothing raises at all.

In both the task is still marked as being cancelled (``Task.cancelling()``), so a loop that
checks before it waits again stops as it was asked to.
"""

from __future__ import annotations

import asyncio


def stop_if_cancelled() -> None:
    """Raise ``CancelledError`` when the current task is being cancelled."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
