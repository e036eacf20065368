"""The nak delay that makes nats-server redeliver after the wanted time (see nak_delay)."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events.streams import ConsumerSpec
from kaiwo_runtime.nats_bus import nak_delay

DEFAULT = ConsumerSpec(
    durable_name="c", stream="S", filter_subjects=("a.>",), description=""
)  # backoff 5, 15, 60, 180
NO_BACKOFF = ConsumerSpec(
    durable_name="c",
    stream="S",
    filter_subjects=("a.>",),
    description="",
    backoff_seconds=(),
    ack_wait_seconds=30.0,
)


@pytest.mark.parametrize(
    ("attempt", "wanted", "sent"),
    [
        (1, 5.0, 5.0),  # the server dates back by 5 s and waits 5 s: as given
        (2, 15.0, 5.0),  # dated back 5 s, waits 15 s: 5 - 5 + 15 = 15
        (3, 60.0, 5.0),
        (4, 180.0, 5.0),
        (5, 180.0, 5.0),  # past the list the server keeps its last entry
        (2, 30.0, 20.0),  # 20 - 5 + 15 = 30
        (3, 10.0, 0.001),  # sooner than 60 - 5 cannot be had: as soon as the server allows
        (2, 0.0, 0.0),  # at once: a plain nak
    ],
)
def test_the_delay_sent_makes_up_for_the_servers_backoff(
    attempt: int, wanted: float, sent: float
) -> None:
    assert nak_delay(DEFAULT, attempt=attempt, wanted=wanted) == sent


def test_without_a_backoff_list_the_server_waits_the_delay_given() -> None:
    assert nak_delay(NO_BACKOFF, attempt=3, wanted=12.5) == 12.5
