"""`kaiwo nats provision` waits while a NATS cluster is still forming, and only then."""

from __future__ import annotations

from kaiwo_cli.commands.nats import _forming
from nats.js.errors import BadRequestError, ServiceUnavailableError


def test_a_forming_cluster_is_waited_for_and_other_refusals_are_not() -> None:
    # Seen in CI: three servers started together answered the first declarations with
    # "no suitable peers for placement" for a few seconds.
    assert _forming(BadRequestError(code=400, err_code=10005, description="no suitable peers"))
    assert _forming(ServiceUnavailableError(code=503, err_code=10008, description="try later"))
    assert not _forming(BadRequestError(code=400, err_code=10052, description="bad config"))
    assert not _forming(PermissionError("permissions violation"))
