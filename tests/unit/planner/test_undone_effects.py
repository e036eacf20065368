"""Which of a plan's effects the observed cluster does not show, judged as the executor
judges them (decision 0250): a child counts for the prune only where the executor's prune
would delete it, an owner's finalizers and labels only where its patch would change them."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.plans import ObjectRef, Plan, PruneRule
from kaiwo_planner.domain.undone_effects import undone_effects

KAIWO = "kaiwo.silogen.ai/v1alpha1"
SELECTOR = {"kaiwo.silogen.ai/owner-uid": "uid-train"}
TRAIN = ObjectRef(
    api_version=KAIWO, kind="KaiwoJob", name="train", namespace="team-a", uid="uid-train"
)
MODEL = ObjectRef(
    api_version="kubeai.org/v1", kind="Model", name="llama", namespace="team-a", uid="uid-llama"
)


def config_map(name: str, *, namespace: str = "team-a") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(SELECTOR),
            "ownerReferences": [
                {
                    "apiVersion": KAIWO,
                    "kind": "KaiwoJob",
                    "name": "train",
                    "uid": "uid-train",
                    "controller": True,
                }
            ],
        },
    }


def pruning(*desired: dict[str, Any], selector: dict[str, str] = SELECTOR) -> Plan:
    return Plan(
        owner=TRAIN,
        desired=desired,
        prune=(PruneRule(api_version="v1", kind="ConfigMap"),),
        prune_selector=selector,
    )


def judged(plan: Plan, owner: dict[str, Any], *children: dict[str, Any]) -> tuple[str, ...]:
    return undone_effects(plan, owner, children=children, by_uid=lambda uid: None)


def test_a_child_the_executors_prune_would_not_list_is_not_undone() -> None:
    owner = {"metadata": {"name": "train", "namespace": "team-a"}}
    # Listed in the owner's namespace only, and never without a selector.
    assert judged(pruning(), owner, config_map("elsewhere", namespace="team-b")) == ()
    assert judged(pruning(selector={}), owner, config_map("old")) == ()
    assert judged(pruning(), owner, config_map("old")) == ("prune",)


def test_a_desired_child_observed_at_another_version_of_its_group_is_wanted() -> None:
    owner = {"metadata": {"name": "train", "namespace": "team-a"}}
    wanted = {**config_map("train"), "apiVersion": "ray.io/v1", "kind": "RayJob"}
    plan = Plan(
        owner=TRAIN,
        desired=(wanted,),
        prune=(PruneRule(api_version="ray.io/v1", kind="RayJob"),),
        prune_selector=SELECTOR,
    )
    # The executor keys objects by group, kind, namespace and name: the same object.
    assert judged(plan, owner, {**wanted, "apiVersion": "ray.io/v1alpha1"}) == ()
    stray = {**config_map("old"), "apiVersion": "ray.io/v1alpha1", "kind": "RayJob"}
    assert judged(plan, owner, stray) == ("prune",)


def test_other_controllers_finalizers_and_the_users_labels_are_theirs() -> None:
    plan = Plan(
        owner=MODEL,
        finalizers=("kubeai.org/cache-eviction",),
        owner_labels={"features.kubeai.org/TextGeneration": "true"},
    )
    settled = {
        "metadata": {
            "finalizers": ["example.com/audit", "kubeai.org/cache-eviction"],
            "labels": {"features.kubeai.org/TextGeneration": "true", "team": "nlp"},
        }
    }
    assert judged(plan, settled) == ()
    bare = {"metadata": {"finalizers": ["example.com/audit"], "labels": {"team": "nlp"}}}
    assert judged(plan, bare) == ("finalizers", "labels")
    released = Plan(owner=MODEL, finalizers=())
    assert judged(released, settled) == ("finalizers",)


def test_the_metadata_of_a_kind_the_executor_does_not_confine_is_not_judged() -> None:
    stranger = ObjectRef(api_version="example.com/v1", kind="Widget", name="w", uid="uid-w")
    plan = Plan(owner=stranger, finalizers=("example.com/mine",), owner_labels={"a": "b"})
    assert judged(plan, {"metadata": {}}) == ()
