"""What of an edited storage spec reaches a claim that exists (decision 0117)."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.domain.children.storage import ClaimUpdate, claim_update


def claim(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "train-data", "namespace": "team-a"},
        "spec": spec,
    }


MADE = claim(
    {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
        "storageClassName": "standard",
        "volumeMode": "Filesystem",
        "volumeName": "pv-1",
    }
)


def test_an_unchanged_claim_is_applied_as_desired():
    desired = claim(
        {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "standard",
        }
    )

    update = claim_update(desired, MADE)

    assert update == ClaimUpdate(manifest=desired, not_applied=())
    assert update.manifest is desired
    assert update.note() is None


def test_a_larger_size_is_asked_for_and_left_to_the_api_server():
    desired = claim(
        {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "20Gi"}},
            "storageClassName": "standard",
        }
    )

    assert claim_update(desired, MADE) == ClaimUpdate(manifest=desired, not_applied=())


def test_the_class_and_access_modes_stay_as_made_and_are_named():
    desired = claim(
        {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "premium",
        }
    )

    update = claim_update(desired, MADE)

    assert update.manifest == claim(
        {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "standard",
        }
    )
    assert update.not_applied == ("spec.accessModes", "spec.storageClassName")
    assert update.note() == (
        "Not applied to the existing claim train-data, because a claim's access modes and "
        "storage class cannot change after it is created, nor can its size shrink: "
        "spec.accessModes, spec.storageClassName. Delete and re-create the workload to use "
        "them."
    )
    assert desired["spec"]["storageClassName"] == "premium"  # the desired claim is untouched


@pytest.mark.parametrize("smaller", ["5Gi", "10000Mi", "9G"])
def test_a_smaller_size_keeps_the_size_made(smaller):
    desired = claim(
        {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": smaller}},
            "storageClassName": "standard",
        }
    )

    update = claim_update(desired, MADE)

    assert update.manifest["spec"]["resources"] == {"requests": {"storage": "10Gi"}}
    assert update.not_applied == ("spec.resources.requests.storage",)


def test_the_same_size_in_other_units_is_not_a_change():
    desired = claim(
        {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10240Mi"}},
            "storageClassName": "standard",
        }
    )

    assert claim_update(desired, MADE) == ClaimUpdate(manifest=desired, not_applied=())


def test_a_class_the_cluster_filled_in_stays_the_clusters():
    # No class given and no KaiwoConfig default: the API server's default class fills it in.
    # Naming it in the manifest would cost every new claim a second apply for nothing.
    desired = claim(
        {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    )

    assert claim_update(desired, MADE) == ClaimUpdate(manifest=desired, not_applied=())


def test_a_claim_observed_without_a_spec_is_applied_as_desired():
    desired = claim(
        {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    )

    assert claim_update(desired, {"metadata": {"name": "train-data"}}).manifest is desired
