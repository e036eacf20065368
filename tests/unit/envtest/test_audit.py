"""Counting the write requests in an API server's audit log, and reading every request of the
users a test names."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from kaiwo_envtest import (
    AUDIT_POLICY,
    AuditEvent,
    AuditLog,
    audit_policy,
    count_writes,
    parse_event,
    parse_request,
)


def line(verb: str, user: str, agent: str = "kaiwo/1", **target: str) -> str:
    event: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "stage": "ResponseComplete",
        "verb": verb,
        "user": {"username": user, "groups": ["system:authenticated"]},
        "userAgent": agent,
        "objectRef": {"resource": "configmaps", "namespace": "ns", "name": "a", **target},
        "responseStatus": {"metadata": {}, "code": 200},
    }
    return json.dumps(event)


def test_the_policy_records_writes_at_metadata_level_and_nothing_else() -> None:
    assert AUDIT_POLICY == {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {
                "level": "Metadata",
                "verbs": ["create", "update", "patch", "delete", "deletecollection"],
            },
            {"level": "None"},
        ],
    }


def test_the_policy_can_record_every_request_of_some_groups_first() -> None:
    policy = audit_policy(["system:serviceaccounts:kaiwo-system"])

    assert policy["omitStages"] == ["RequestReceived"]
    assert policy["rules"] == [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts:kaiwo-system"]},
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
        {"level": "None"},
    ]
    assert audit_policy() == AUDIT_POLICY


def test_a_line_becomes_one_write() -> None:
    parsed = parse_event(line("patch", "envtest-admin", subresource="status"))
    assert parsed == AuditEvent(
        verb="patch",
        user="envtest-admin",
        user_agent="kaiwo/1",
        resource="configmaps",
        subresource="status",
        namespace="ns",
        name="a",
        code=200,
    )
    assert parse_event(line("get", "envtest-admin")) is None
    assert parse_event("  \n") is None


def test_writes_are_counted_per_user_or_agent_and_verb() -> None:
    events = [
        AuditEvent("patch", "kaiwo", "exec/1", "jobs", "", "ns", "a", 200),
        AuditEvent("patch", "kaiwo", "exec/1", "jobs", "status", "ns", "a", 200),
        AuditEvent("create", "kaiwo", "watch/1", "events", "", "ns", "e", 201),
        AuditEvent("update", "system:serviceaccount:kube-system:job-controller", "kcm", "jobs",
                   "status", "ns", "a", 200),
    ]  # fmt: skip
    assert count_writes(events) == Counter(
        {
            ("kaiwo", "patch"): 2,
            ("kaiwo", "create"): 1,
            ("system:serviceaccount:kube-system:job-controller", "update"): 1,
        }
    )
    assert count_writes(events, by="user_agent") == Counter(
        {("exec/1", "patch"): 2, ("watch/1", "create"): 1, ("kcm", "update"): 1}
    )


def test_the_log_is_read_from_a_mark_and_a_half_written_line_waits(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    assert log.mark() == 0
    assert log.events() == []
    log.path.write_text(line("create", "a") + "\n" + line("get", "a") + "\n")
    mark = log.mark()
    with log.path.open("a") as out:
        out.write(line("delete", "b") + "\n" + line("patch", "c")[:40])
    assert [e.verb for e in log.events()] == ["create", "delete"]
    assert log.writes(since=mark) == Counter({("b", "delete"): 1})


def test_a_mark_taken_while_a_line_was_written_skips_the_rest_of_that_line(
    tmp_path: Path,
) -> None:
    """CI once marked the log while the API server wrote a line: the next read started with
    the line's tail, which is no JSON."""
    log = AuditLog(tmp_path / "audit.log")
    written = line("create", "a") + "\n" + line("patch", "b")
    log.path.write_text(written[:-30])
    mark = log.mark()
    with log.path.open("a") as out:
        out.write(written[-30:] + "\n" + line("delete", "c") + "\n")
    assert log.writes(since=mark) == Counter({("c", "delete"): 1})
    assert [e.verb for e in log.events()] == ["create", "patch", "delete"]


def test_a_read_is_a_request_with_its_api_group_and_a_request_for_no_resource_its_path() -> None:
    watch = json.loads(line("watch", "system:serviceaccount:kaiwo-system:kaiwo-watcher"))
    watch["objectRef"] = {"resource": "jobs", "apiGroup": "batch", "apiVersion": "v1"}
    watch["requestURI"] = "/apis/batch/v1/jobs?watch=true"
    discovery = json.loads(line("get", "kaiwo"))
    del discovery["objectRef"]
    discovery["requestURI"] = "/apis/ray.io/v1"
    discovery["responseStatus"]["code"] = 403

    parsed = parse_request(json.dumps(watch))

    assert parsed == AuditEvent(
        verb="watch",
        user="system:serviceaccount:kaiwo-system:kaiwo-watcher",
        user_agent="kaiwo/1",
        resource="jobs",
        subresource="",
        namespace="",
        name="",
        code=200,
        api_group="batch",
        uri="/apis/batch/v1/jobs?watch=true",
    )
    assert not parsed.is_write
    assert parse_event(json.dumps(watch)) is None
    assert parse_request(json.dumps(discovery)) == AuditEvent(
        "get", "kaiwo", "kaiwo/1", "", "", "", "", 403, api_group="", uri="/apis/ray.io/v1"
    )


def test_requests_holds_reads_and_writes_and_events_the_writes_only(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    log.path.write_text(line("list", "a") + "\n" + line("patch", "a") + "\n")

    assert [(e.verb, e.is_write) for e in log.requests()] == [("list", False), ("patch", True)]
    assert [e.verb for e in log.events()] == ["patch"]
