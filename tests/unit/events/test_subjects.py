"""Subjects: builders, escaping (names with dots never leak into tokens), parsing, filters."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kaiwo_contracts.events.subjects import (
    Family,
    ParsedSubject,
    SubjectError,
    dead_letter_subject,
    escape_token,
    monitor_subject,
    observed_subject,
    parse_subject,
    plan_subject,
    public_workload_subject,
    result_subject,
    subscription_filter,
    unescape_token,
)

UID = "6f1c2d3e-0000-4a4a-8b8b-123456789abc"


def test_builders_follow_the_documented_layout() -> None:
    assert observed_subject(kind="KaiwoJob", namespace="team-a", uid=UID) == (
        f"kaiwo.obs.kaiwojob.team-a.{UID}"
    )
    assert (
        observed_subject(kind="Node", namespace=None, uid=UID) == f"kaiwo.obs.node._cluster.{UID}"
    )
    assert (
        plan_subject(kind="Model", namespace="models", uid=UID) == f"kaiwo.plan.model.models.{UID}"
    )
    assert result_subject(outcome="failed", kind="KaiwoService", namespace="x", uid=UID) == (
        f"kaiwo.res.failed.kaiwoservice.x.{UID}"
    )
    assert monitor_subject(topic="preemption", namespace="team-a", uid=UID) == (
        f"kaiwo.mon.preemption.team-a.{UID}"
    )
    assert dead_letter_subject(stream="KAIWO_OBS", consumer="planner-obs") == (
        "kaiwo.dlq.KAIWO_OBS.planner-obs"
    )


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("node-1.example.com", "node-1_2Eexample_2Ecom"),
        ("_cluster", "_5Fcluster"),
        ("a*b>c d", "a_2Ab_3Ec_20d"),
        ("Zürich", "Z_C3_BCrich"),
        ("plain-Name-42", "plain-Name-42"),
    ],
)
def test_escaping_leaves_only_safe_characters_and_reverses(raw: str, escaped: str) -> None:
    assert escape_token(raw) == escaped
    assert unescape_token(escaped) == raw


@given(st.text(min_size=1, max_size=60))
def test_any_string_escapes_to_one_safe_reversible_token(raw: str) -> None:
    token = escape_token(raw)

    assert re.fullmatch(r"[A-Za-z0-9_-]+", token)
    assert token != "_cluster"
    assert unescape_token(token) == raw


def test_a_token_without_escapes_unescapes_to_itself() -> None:
    assert unescape_token("0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001") == (
        "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"
    )


@pytest.mark.parametrize("bad", ["", "a_b", "a_zz", "a.b", "_C3"])
def test_unescaping_rejects_what_escaping_never_produces(bad: str) -> None:
    with pytest.raises(SubjectError):
        unescape_token(bad)


def test_a_uid_that_is_not_a_uuid_is_escaped_not_passed_raw() -> None:
    assert observed_subject(kind="Pod", namespace="ns", uid="weird.uid") == (
        "kaiwo.obs.pod.ns.weird_2Euid"
    )


@pytest.mark.parametrize("namespace", ["Team-A", "a.b", "-x", "x" * 64])
def test_namespaces_must_be_dns_labels(namespace: str) -> None:
    with pytest.raises(SubjectError, match="DNS-1123"):
        observed_subject(kind="Pod", namespace=namespace, uid=UID)


def test_kinds_must_be_alphanumeric() -> None:
    with pytest.raises(SubjectError):
        plan_subject(kind="Kaiwo.Job", namespace="a", uid=UID)


@pytest.mark.parametrize(
    ("subject", "parsed"),
    [
        (
            f"kaiwo.obs.kaiwojob.team-a.{UID}",
            ParsedSubject(family=Family.OBSERVED, kind="kaiwojob", namespace="team-a", uid=UID),
        ),
        (
            f"kaiwo.obs.node._cluster.{UID}.3",
            ParsedSubject(family=Family.OBSERVED, kind="node", uid=UID, partition=3),
        ),
        (
            "kaiwo.res.applied.job.ns.weird_2Euid",
            ParsedSubject(
                family=Family.RESULT,
                kind="job",
                namespace="ns",
                uid="weird.uid",
                qualifier="applied",
            ),
        ),
        (
            f"kaiwo.mon.utilization.team-a.{UID}",
            ParsedSubject(
                family=Family.MONITOR, namespace="team-a", uid=UID, qualifier="utilization"
            ),
        ),
        (
            "kaiwo.dlq.KAIWO_PLAN.executor-plan",
            ParsedSubject(family=Family.DEAD_LETTER, stream="KAIWO_PLAN", consumer="executor-plan"),
        ),
    ],
)
def test_parsing_recovers_the_parts(subject: str, parsed: ParsedSubject) -> None:
    assert parse_subject(subject) == parsed


@pytest.mark.parametrize(
    "subject",
    [
        "orders.obs.a.b.c",
        "kaiwo.cmd.a.b.c",
        "kaiwo.obs.a.b",
        "kaiwo.obs.a.b.c.x",
        "kaiwo.plan.a.b.c.1.2",
    ],
)
def test_parsing_rejects_foreign_or_malformed_subjects(subject: str) -> None:
    with pytest.raises(SubjectError):
        parse_subject(subject)


def test_filters_narrow_by_the_parts_given() -> None:
    assert subscription_filter(Family.OBSERVED) == "kaiwo.obs.>"
    assert subscription_filter(Family.OBSERVED, kind="Node") == "kaiwo.obs.node.*.*"
    assert subscription_filter(Family.OBSERVED, cluster_scoped=True) == "kaiwo.obs.*._cluster.*"
    assert subscription_filter(Family.PLAN, namespace="team-a") == "kaiwo.plan.*.team-a.*"
    assert subscription_filter(Family.RESULT, qualifier="failed") == "kaiwo.res.failed.*.*.*"
    assert subscription_filter(Family.OBSERVED, partition=2) == "kaiwo.obs.*.*.*.2"
    assert subscription_filter(Family.MONITOR, uid=UID, partitioned=True) == (
        f"kaiwo.mon.*.*.{UID}.*"
    )
    with pytest.raises(SubjectError):
        subscription_filter(Family.OBSERVED, namespace="a", cluster_scoped=True)


def test_public_workload_subjects_put_the_namespace_first_and_parse_back() -> None:
    uid = "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"
    subject = public_workload_subject(namespace="team-a", kind="KaiwoService", uid=uid)

    assert subject == f"kaiwo.public.workload.team-a.kaiwoservice.{uid}"
    assert parse_subject(subject) == ParsedSubject(
        family=Family.PUBLIC,
        kind="kaiwoservice",
        namespace="team-a",
        uid=uid,
        qualifier="workload",
    )
    assert subscription_filter(Family.PUBLIC, namespace="team-a") == ("kaiwo.public.*.team-a.*.*")
