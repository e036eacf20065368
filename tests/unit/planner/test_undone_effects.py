"""Which of a plan's effects the observed cluster does not show, judged as the executor
judges them (decisions 0250 and 0263): a child counts for the prune only where the executor's
prune would delete it, an owner's finalizers and labels only where its patch would change
them, a scale or a preemption only where the executor would still write or delete."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.plans import ObjectRef, Plan, PreemptIntent, PruneRule, ScaleIntent
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


def model(*, generation: int = 1, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"uid": "uid-llama", "generation": generation}, "spec": spec}


def scaling(replicas: int, *, from_replicas: int) -> Plan:
    intent = ScaleIntent(target=MODEL, replicas=replicas, from_replicas=from_replicas)
    return Plan(owner=MODEL, observed_generation=1, scale=intent)


def test_a_scale_is_undone_only_while_the_executor_would_write_it() -> None:
    up = scaling(3, from_replicas=1)
    assert judged(up, model(replicas=1)) == ("scale",)
    assert judged(up, model(replicas=3, generation=2)) == ()  # made
    # Someone scaled it since, or changed its spec: the executor leaves it to the next decision.
    assert judged(up, model(replicas=2, generation=2)) == ()
    assert judged(up, model(replicas=1, generation=2)) == ()
    # Another object of the name (another uid) is not the one planned.
    assert judged(up, {**model(replicas=1), "metadata": {"uid": "uid-other"}}) == ()


def test_replicas_written_down_only_while_unset_are_undone_only_while_unset() -> None:
    """``from_replicas == replicas``: the Model's replicas unset (decision 0223)."""
    written_down = scaling(0, from_replicas=0)
    assert judged(written_down, model()) == ("scale",)
    assert judged(written_down, model(replicas=0)) == ()
    assert judged(written_down, model(replicas=2)) == ()  # set by someone: it stands


SERVER = ObjectRef(
    api_version="apps/v1", kind="Deployment", name="server", namespace="team-a", uid="uid-server"
)
POD = ObjectRef(api_version="v1", kind="Pod", name="idle", namespace="team-a", uid="uid-idle")
RECORD = ObjectRef(
    api_version=KAIWO, kind="GpuWorkload", name="pod-idle", namespace="team-a", uid="uid-record"
)


def preempted(victim: dict[str, Any] | None, intent: PreemptIntent) -> tuple[str, ...]:
    plan = Plan(owner=RECORD, preempt=intent)
    found = {intent.target.uid: victim} if victim is not None else {}
    return undone_effects(plan, {"metadata": {}}, children=(), by_uid=found.get)


def test_a_preemption_is_undone_while_its_workload_runs_and_is_not_being_stopped() -> None:
    deleting = PreemptIntent(target=POD, action="delete")
    pod = {"metadata": {"uid": "uid-idle"}, "spec": {}}
    assert preempted(pod, deleting) == ("preempt",)
    assert preempted({"metadata": {"uid": "uid-idle", "deletionTimestamp": "t"}}, deleting) == ()
    assert preempted(None, deleting) == ()  # gone (or another uid holds the name)

    to_zero = PreemptIntent(target=SERVER, action="scale-to-zero", from_replicas=2)
    server = {"metadata": {"uid": "uid-server"}, "spec": {"replicas": 2}}
    assert preempted(server, to_zero) == ("preempt",)
    assert preempted({**server, "spec": {"replicas": 0}}, to_zero) == ()
    # Scaled by someone since the decision: the executor leaves it alone.
    assert preempted({**server, "spec": {"replicas": 3}}, to_zero) == ()
    stopping = {**server, "metadata": {"uid": "uid-server", "deletionTimestamp": "t"}}
    assert preempted(stopping, to_zero) == ()
