"""What a plan was computed from: the digest of what people wrote, and the verdict on a source
against the live object (decision 0038)."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from kaiwo_contracts.plan_sources import source_digest, source_of, source_verdict
from kaiwo_contracts.plans import ObjectRef, Plan, PlanSource

KAIWO = "kaiwo.silogen.ai/v1alpha1"


def job(**metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "job-uid",
            "resourceVersion": "12",
            "generation": 2,
            "labels": {"team": "vision"},
            "annotations": {"kaiwo.silogen.ai/gpu-preemption.policy": "OnPressure"},
            "finalizers": ["someone.else/keep"],
            "managedFields": [{"manager": "kubectl"}],
            **metadata,
        },
        "spec": {"image": "busybox", "gpus": 1},
        "status": {"status": "RUNNING"},
    }


def sha256_of(document: dict[str, Any]) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_digest_is_of_what_people_write_and_nothing_the_operator_moves() -> None:
    written = {
        "content": {"spec": {"image": "busybox", "gpus": 1}},
        "labels": {"team": "vision"},
        "annotations": {"kaiwo.silogen.ai/gpu-preemption.policy": "OnPressure"},
        "deleting": False,
    }
    assert source_digest(job()) == sha256_of(written)

    # The status, the version, finalizers and managed fields are not what users write.
    moved = job(resourceVersion="13", finalizers=[], managedFields=[])
    moved["status"] = {"status": "COMPLETE"}
    assert source_digest(moved) == source_digest(job())


def test_every_written_part_changes_the_digest() -> None:
    original = source_digest(job())
    image = job()
    image["spec"]["image"] = "evil/miner"
    relabelled = job(labels={"team": "other"})
    opted_in = job(annotations={"kaiwo.silogen.ai/gpu-preemption.policy": "Always"})
    deleting = job(deletionTimestamp="2026-03-01T12:00:00Z")
    for changed in (image, relabelled, opted_in, deleting):
        assert source_digest(changed) != original


def test_a_models_feature_labels_are_the_operators_and_a_config_maps_data_is_written() -> None:
    model = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "llm", "namespace": "ai", "labels": {"app": "chat"}},
        "spec": {"url": "hf://o/m"},
    }
    featured = copy.deepcopy(model)
    featured["metadata"]["labels"]["features.kubeai.org/TextGeneration"] = "true"
    assert source_digest(featured) == source_digest(model)

    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kaiwo-models", "namespace": "kaiwo-system"},
        "data": {"models.yaml": "modelAutoscaling: {maxReplicas: 4}"},
    }
    assert source_digest(config_map) == sha256_of(
        {
            "content": {"data": {"models.yaml": "modelAutoscaling: {maxReplicas: 4}"}},
            "labels": {},
            "annotations": {},
            "deleting": False,
        }
    )


def test_a_source_names_the_object_its_version_and_digest() -> None:
    assert source_of(job()) == PlanSource(
        ref=ObjectRef(
            api_version=KAIWO, kind="KaiwoJob", name="train", namespace="team-a", uid="job-uid"
        ),
        generation=2,
        resource_version="12",
        digest=source_digest(job()),
    )
    assert source_of(job(), whole=False).digest is None


def test_the_verdict_tells_a_forged_source_from_a_stale_one() -> None:
    planned = source_of(job())
    forged = job()
    forged["spec"]["image"] = "evil/miner"

    assert source_verdict(planned, job()) == "match"
    # The live object moved on since (a newer resourceVersion): the plan is stale.
    newer = copy.deepcopy(forged)
    newer["metadata"]["resourceVersion"] = "13"
    assert source_verdict(planned, newer) == "stale"
    # The planner held content the API server never had at that version (or a later one):
    # what a forged observation gives.
    assert source_verdict(source_of(forged), job()) == "differs"
    ahead = copy.deepcopy(forged)
    ahead["metadata"]["resourceVersion"] = "999999"
    assert source_verdict(source_of(ahead), job()) == "differs"
    # Another uid under the name, no object at all, an unorderable version.
    assert source_verdict(planned, job(uid="other-uid")) == "differs"
    assert source_verdict(planned, None) == "differs"
    odd = copy.deepcopy(newer)
    odd["metadata"]["resourceVersion"] = "abc"
    assert source_verdict(planned, odd) == "differs"
    # A source held only in part is compared by identity.
    assert source_verdict(source_of(job(), whole=False), forged) == "match"


def test_source_versions_do_not_make_a_plan_news_but_digests_do() -> None:
    owner = ObjectRef(api_version=KAIWO, kind="KaiwoJob", name="train", uid="job-uid")

    def plan(version: str, digest: str) -> Plan:
        source = PlanSource(ref=owner, generation=2, resource_version=version, digest=digest)
        return Plan(owner=owner, sources=(source,))

    assert plan("12", "a" * 64).fingerprint() == plan("13", "a" * 64).fingerprint()
    assert plan("12", "a" * 64).fingerprint() != plan("12", "b" * 64).fingerprint()
    # A plan without sources reads (and hashes) as it always did.
    assert "sources" not in Plan(owner=owner).model_dump(mode="json")
