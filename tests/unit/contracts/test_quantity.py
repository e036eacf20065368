"""Quantity keeps exactly what was given: "8" stays a string, 8 stays an integer."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.crds.base import KubeModel
from kaiwo_contracts.crds.core_v1 import ResourceRequirements
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import ResourceQuota
from kaiwo_contracts.crds.quantity import Quantity
from kaiwo_contracts.crds.schema import structural_schema
from pydantic import ValidationError

# Kubernetes' quantity grammar without the minus sign, as written into the CRDs.
QUANTITY_GRAMMAR = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
)


class Sized(KubeModel):
    size: Quantity


@pytest.mark.parametrize("given", ["8", 8, "16Gi", "500m", 0])
def test_a_quantity_round_trips_with_its_json_type(given: Any) -> None:
    dumped = Sized.from_wire({"size": given}).to_wire()

    assert dumped == {"size": given}
    assert type(dumped["size"]) is type(given)


def test_resource_requests_keep_strings_and_integers_apart() -> None:
    wire = {"requests": {"cpu": "8", "memory": "16Gi"}, "limits": {"cpu": 8}}

    parsed = ResourceRequirements.from_wire(wire)

    assert parsed.requests == {"cpu": "8", "memory": "16Gi"}
    assert parsed.limits == {"cpu": 8}
    assert parsed.to_wire() == wire


def test_a_queue_quota_keeps_the_string_form() -> None:
    wire = {"name": "amd.com/gpu", "nominalQuota": "8", "borrowingLimit": 2}

    assert ResourceQuota.from_wire(wire).to_wire() == wire


@pytest.mark.parametrize("given", [True, 1.5, None])
def test_values_that_are_neither_integer_nor_string_are_rejected(given: Any) -> None:
    with pytest.raises(ValidationError):
        Sized.from_wire({"size": given})


def test_the_crd_schema_is_the_one_int_or_string_form() -> None:
    assert structural_schema(Sized)["properties"]["size"] == {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "minimum": 0,
        "pattern": QUANTITY_GRAMMAR,
    }
