"""The messenger's subjects, streams and a tenant's key (decision 0049)."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events.messenger import (
    NotATenantError,
    messenger_topology,
    request_subject,
    response_subject,
    tenant_key_name,
    tenant_of,
)
from kaiwo_contracts.events.permissions import reader_identity, tenant_identity


def test_each_namespace_has_its_own_subjects_outside_the_operators_events() -> None:
    assert request_subject("team-a") == "kaiwo-messenger.team-a.requests"
    assert response_subject("team-a") == "kaiwo-messenger.team-a.responses"
    assert tenant_of("kaiwo-messenger.team-a.requests") == "team-a"


@pytest.mark.parametrize(
    "subject",
    ["kaiwo-messenger.team-a.responses", "kaiwo.gateway.load.x", "kaiwo-messenger.Team.requests"],
)
def test_only_a_requests_subject_names_a_tenant(subject: str) -> None:
    with pytest.raises(NotATenantError):
        tenant_of(subject)


def test_a_namespace_that_is_no_dns_label_or_too_long_for_a_key_is_refused() -> None:
    with pytest.raises(NotATenantError, match="not a namespace name"):
        request_subject("team.a")
    with pytest.raises(NotATenantError, match="at most 56 characters"):
        tenant_key_name("a" * 57)
    assert tenant_key_name("a" * 56) == "tenant-" + "a" * 56


def test_requests_are_a_work_queue_and_answers_are_kept() -> None:
    topology = messenger_topology()
    requests, responses = topology.streams

    assert (requests.name, requests.retention, requests.subjects) == (
        "KAIWO_MSG_REQ",
        "workqueue",
        ("kaiwo-messenger.*.requests",),
    )
    assert (responses.name, responses.retention, responses.subjects) == (
        "KAIWO_MSG_RES",
        "limits",
        ("kaiwo-messenger.*.responses", "kaiwo-messenger.*.dead"),
    )
    [consumer] = topology.consumers
    assert (consumer.durable_name, consumer.max_deliver) == ("gateway-messenger", 5)


def test_a_tenant_key_may_send_its_requests_and_read_its_answers_only() -> None:
    tenant = tenant_identity("team-a")

    assert tenant.name == "tenant-team-a"
    assert tenant.permissions.publish == (
        "kaiwo-messenger.team-a.requests",
        "$JS.API.CONSUMER.CREATE.KAIWO_MSG_RES.tenant-team-a.kaiwo-messenger.team-a.responses",
        "$JS.API.CONSUMER.INFO.KAIWO_MSG_RES.tenant-team-a",
        "$JS.API.CONSUMER.DELETE.KAIWO_MSG_RES.tenant-team-a",
        "$JS.API.CONSUMER.MSG.NEXT.KAIWO_MSG_RES.tenant-team-a",
        "$JS.ACK.KAIWO_MSG_RES.tenant-team-a.>",
    )
    # Live where the stream republishes, not where it stores (decision 0287).
    assert tenant.permissions.subscribe == (
        "kaiwo-messenger.team-a.live",
        "_INBOX.tenant-team-a.>",
    )


def test_a_reader_cannot_take_a_tenants_name() -> None:
    with pytest.raises(ValueError, match="taken by the operator"):
        reader_identity("tenant-team-a")
