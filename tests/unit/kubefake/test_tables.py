"""Table answers and the OpenAPI documents of the fake (expected values by hand)."""

from __future__ import annotations

from datetime import UTC, datetime

from kaiwo_kubefake.kinds import BUILTIN_KINDS
from kaiwo_kubefake.openapi import openapi_v3_group_version, openapi_v3_index
from kaiwo_kubefake.tables import human_duration, json_path, printer_columns, table, wants_table

CRD = {
    "spec": {
        "group": "kaiwo.silogen.ai",
        "scope": "Namespaced",
        "names": {"kind": "KaiwoJob", "plural": "kaiwojobs"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object"}},
                    }
                },
                "additionalPrinterColumns": [
                    {"name": "Status", "type": "string", "jsonPath": ".status.status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }
        ],
    }
}


def test_kubectl_accept_header_asks_for_a_table() -> None:
    assert wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert not wants_table("application/json")
    assert not wants_table(None)


def test_rows_carry_name_then_the_printer_columns() -> None:
    job = {
        "metadata": {"name": "a", "namespace": "ml", "creationTimestamp": "2026-01-01T11:57:00Z"},
        "status": {"status": "RUNNING"},
    }
    columns = printer_columns(CRD, version="v1alpha1", plural="kaiwojobs")
    answer = table([job], columns, resource_version="7", now=datetime(2026, 1, 1, 12, tzinfo=UTC))
    assert [c["name"] for c in answer["columnDefinitions"]] == ["Name", "Status", "Age"]
    assert answer["rows"][0]["cells"] == ["a", "RUNNING", "3m"]
    assert answer["rows"][0]["object"]["metadata"]["namespace"] == "ml"
    assert answer["metadata"] == {"resourceVersion": "7"}


def test_builtin_kinds_without_a_crd_get_name_and_age() -> None:
    assert [c["name"] for c in printer_columns(None, version="v1", plural="configmaps")] == ["Age"]


def test_json_path_and_ages() -> None:
    obj = {"status": {"conditions": [{"type": "Ready"}]}}
    assert json_path(obj, ".status.conditions[0].type") == "Ready"
    assert json_path(obj, "{.status.conditions[1].type}") is None
    assert json_path(obj, ".spec.x") is None
    assert [human_duration(s) for s in (45, 200, 3600, 7 * 3600 + 60, 3 * 86400)] == [
        "45s",
        "3m20s",
        "60m",
        "7h1m",
        "3d",
    ]


def test_openapi_v3_names_every_group_version_and_the_patch_that_validates() -> None:
    index = openapi_v3_index([CRD], BUILTIN_KINDS)
    assert "api/v1" in index["paths"] and "apis/batch/v1" in index["paths"]
    document = openapi_v3_group_version([CRD], "apis/kaiwo.silogen.ai/v1alpha1")
    assert document is not None
    patch = document["paths"][
        "/apis/kaiwo.silogen.ai/v1alpha1/namespaces/{namespace}/kaiwojobs/{name}"
    ]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "kaiwo.silogen.ai",
        "version": "v1alpha1",
        "kind": "KaiwoJob",
    }
    assert [p["name"] for p in patch["parameters"]] == ["fieldValidation"]
    schema = document["components"]["schemas"]["ai.silogen.kaiwo.v1alpha1.KaiwoJob"]
    assert schema["properties"] == {"spec": {"type": "object"}}
    assert openapi_v3_group_version([CRD], "apis/unknown/v1") is None
