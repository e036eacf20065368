"""docs/asyncapi.yaml: generated from the contracts, current, and valid AsyncAPI 3.0.0."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from kaiwo_cli.commands.asyncapi import asyncapi_yaml
from kaiwo_contracts.events.public import (
    EstimateMethod,
    PreemptionV1,
    StartEstimate,
    WorkloadEventV1,
    WorkloadEventV2,
    WorkloadRef,
    WorkloadTransition,
    WorkloadTransitionV2,
)
from kaiwo_contracts.events.subjects import public_workload_subject

REPO = Path(__file__).resolve().parents[3]
COMMITTED = REPO / "docs" / "asyncapi.yaml"
ASYNCAPI_SCHEMA = Path(__file__).parent / "asyncapi" / "asyncapi-3.0.0.schema.json"
HINT = "docs/asyncapi.yaml is out of date with the contracts: run `make asyncapi` and commit it"


def committed() -> dict[str, Any]:
    document = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def asyncapi_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(ASYNCAPI_SCHEMA.read_text(encoding="utf-8")))


def payload_validator(
    document: dict[str, Any], message: str = "WorkloadEventV1"
) -> jsonschema.Draft202012Validator:
    schema = {
        "$ref": f"#/components/messages/{message}/payload",
        "components": document["components"],
    }
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def test_the_committed_document_is_the_generated_one() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == asyncapi_yaml(), HINT


def test_the_document_is_valid_asyncapi_3() -> None:
    errors = [error.message for error in asyncapi_validator().iter_errors(committed())]

    assert errors == []


def test_the_asyncapi_schema_does_catch_a_broken_document() -> None:
    broken = copy.deepcopy(committed())
    broken["operations"]["receiveWorkloadEvents"]["action"] = "listen"
    del broken["channels"]["workloadEvents"]["address"]
    broken["channels"]["workloadEvents"]["adress"] = "kaiwo.public.>"

    assert not asyncapi_validator().is_valid(broken)


def test_the_channel_address_is_the_subject_the_planner_publishes_on() -> None:
    address = committed()["channels"]["workloadEvents"]["address"]
    uid = "0b6c3f7e-1d2a-4c5b-9e8f-7a6b5c4d3e2f"

    filled = address.format(namespace="team-a", kind="kaiwojob", uid=uid)

    assert filled == public_workload_subject(namespace="team-a", kind="KaiwoJob", uid=uid)
    assert filled == f"kaiwo.public.workload.team-a.kaiwojob.{uid}"


def test_the_documented_payload_accepts_a_real_event_and_nothing_else() -> None:
    event = WorkloadEventV1(
        transition=WorkloadTransition.PREEMPTED,
        workload=WorkloadRef(kind="KaiwoJob", namespace="team-a", name="sft", uid="u-1"),
        user="ada@example.com",
        queue="kaiwo",
        phase="TERMINATING",
        reason="DurationExceededWithActiveGpuDemand",
        observed_at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        resource_version="41",
    ).model_dump(mode="json")
    validator = payload_validator(committed())

    assert list(validator.iter_errors(event)) == []
    assert not validator.is_valid({**event, "transition": "exploded"})
    assert not validator.is_valid({**event, "object": {"spec": {"env": []}}})
    assert not validator.is_valid({key: v for key, v in event.items() if key != "workload"})


def test_the_preemption_decision_is_a_second_message_on_the_same_channel() -> None:
    document = committed()
    channel = document["channels"]["workloadEvents"]["messages"]
    assert sorted(channel) == ["PreemptionV1", "WorkloadEventV1", "WorkloadEventV2"]
    headers = document["components"]["messages"]["PreemptionV1"]["headers"]
    assert headers["properties"]["ce-type"]["const"] == "ai.silogen.kaiwo.public.preemption.v1"
    event = PreemptionV1(
        victim=WorkloadRef(kind="KaiwoJob", namespace="team-a", name="idle", uid="u-1"),
        beneficiary=WorkloadRef(kind="KaiwoJob", namespace="team-b", name="next", uid="u-2"),
        reason="GpuIdlePreemption",
        observed_at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        resource_version="71",
    ).model_dump(mode="json")
    validator = payload_validator(document, "PreemptionV1")

    assert list(validator.iter_errors(event)) == []
    assert list(validator.iter_errors({**event, "beneficiary": None})) == []
    assert not validator.is_valid({key: v for key, v in event.items() if key != "victim"})
    assert not validator.is_valid({**event, "policy": "Always"})


def test_the_queued_transition_with_its_estimate_is_v2_on_the_same_channel() -> None:
    document = committed()
    headers = document["components"]["messages"]["WorkloadEventV2"]["headers"]
    assert headers["properties"]["ce-type"]["const"] == "ai.silogen.kaiwo.public.workload.v2"
    event = WorkloadEventV2(
        transition=WorkloadTransitionV2.QUEUED,
        workload=WorkloadRef(kind="KaiwoJob", namespace="team-a", name="train", uid="u-1"),
        queue="kaiwo",
        phase="PENDING",
        observed_at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        resource_version="71",
        estimate=StartEstimate(
            cluster_queue="kaiwo",
            resource="nvidia.com/gpu",
            gpus=4,
            position=2,
            start=datetime(2026, 3, 1, 12, 15, tzinfo=UTC),
            earliest=datetime(2026, 3, 1, 12, 5, tzinfo=UTC),
            latest=datetime(2026, 3, 1, 12, 40, tzinfo=UTC),
            method=EstimateMethod.RUN_TIMES,
            recorded_runs=12,
            declared=0,
            admissions_per_hour=2.5,
            capacity_gpus=16,
        ),
    ).model_dump(mode="json")
    validator = payload_validator(document, "WorkloadEventV2")

    assert event["estimate"]["method"] == "recorded run times"
    assert event["estimate"]["clusterQueue"] == "kaiwo"
    assert list(validator.iter_errors(event)) == []
    assert list(validator.iter_errors({**event, "estimate": None})) == []
    assert not validator.is_valid({**event, "transition": "estimated"})
    assert not validator.is_valid({**event, "estimate": {**event["estimate"], "position": 0}})
    # v1 stays closed: the estimate is not one of its fields, queued not one of its transitions.
    v1 = payload_validator(document, "WorkloadEventV1")
    assert not v1.is_valid(event)
    assert not v1.is_valid({key: v for key, v in event.items() if key != "estimate"})


def test_check_without_a_file_to_compare_is_refused(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from kaiwo_cli.main import app

    refused = CliRunner().invoke(app, ["asyncapi", "--check"])
    assert refused.exit_code == 2
    assert "Invalid value for --check: name the file to compare with --out" in refused.output
    assert "asyncapi: 3.0.0" not in refused.output  # not printed as if checked

    stale = tmp_path / "asyncapi.yaml"
    stale.write_text("old\n")
    assert CliRunner().invoke(app, ["asyncapi", "--check", "--out", str(stale)]).exit_code == 1
    stale.write_text(asyncapi_yaml())
    assert CliRunner().invoke(app, ["asyncapi", "--check", "--out", str(stale)]).exit_code == 0
