"""Plans forged with the planner's own credentials, against the real API server: the attack of
the trust-boundary issue, one step further than the bus permissions (which keep everyone
else from publishing plans at all). The planner's key reads every observation, so its plans
can name their owners' live content as their sources (decision 0038); the executor still
refuses every plan that leaves its owner's confinement, dead-letters it with the reason,
and applies nothing of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.permissions import PLANNER
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import DEAD_LETTER_STREAM, bus_topology
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_contracts.plan_sources import source_of
from kaiwo_contracts.plans import ObjectRef, Plan, PlanSource, PruneRule, ScaleIntent
from kaiwo_kube import NotFound, resources
from kaiwo_kube.resources import known_type
from kaiwo_runtime.dead_letters import DLQ_REASON
from kaiwo_runtime.nats_bus import NatsBus

from tests.integration.conftest import real_sqlite
from tests.integration.pipeline import cluster_actors as actors
from tests.waiting import Pending, eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow]

KAIWO = "kaiwo.silogen.ai/v1alpha1"
REFUSED = "rejected: PoisonMessage: plan refused: "


def controller(owner: ObjectRef) -> dict[str, Any]:
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
    }


def miner(owner: ObjectRef) -> dict[str, Any]:
    """A privileged host-PID, host-network Deployment in kube-system."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "miner",
            "namespace": "kube-system",
            "ownerReferences": [controller(owner)],
        },
        "spec": {
            "selector": {"matchLabels": {"app": "miner"}},
            "template": {
                "metadata": {"labels": {"app": "miner"}},
                "spec": {
                    "hostPID": True,
                    "hostNetwork": True,
                    "containers": [
                        {
                            "name": "x",
                            "image": "busybox",
                            "securityContext": {"privileged": True},
                        }
                    ],
                },
            },
        },
    }


async def publish_as_planner(pipeline: Any, plan: Plan) -> None:
    bus = await NatsBus.connect(
        pipeline.stack.nats_connection(PLANNER), topology=bus_topology(), name="forger"
    )
    try:
        envelope = Envelope.new(
            data=PlanDecidedV1.of(plan, planned_at=datetime.now(UTC)),
            source="/kaiwo/planner",
            time=datetime.now(UTC),
            correlationid=plan.owner.uid or plan.owner.name,
        )
        subject = plan_subject(
            kind=plan.owner.kind,
            namespace=plan.owner.namespace,
            uid=plan.owner.uid or plan.owner.name,
        )
        await bus.publish(envelope, subject)
    finally:
        await bus.close()


async def bound_to_the_live_owner(kube: Any, plan: Plan) -> Plan:
    """``plan`` naming its owner as the API server holds it now (as the planner's key, which
    reads every observation, could): only confinement stands between it and the cluster."""
    owner = plan.owner
    resource = known_type(owner.api_version, owner.kind)
    assert resource is not None
    try:
        live = await kube.get(resource, owner.name, namespace=owner.namespace)
    except NotFound:
        return plan.model_copy(update={"sources": (PlanSource(ref=owner, digest="0" * 64),)})
    return plan.model_copy(update={"sources": (source_of(live),)})


async def dead_letter_reasons(pipeline: Any, count: int) -> list[str]:
    async def dead_lettered() -> int | Pending:
        messages = (await pipeline.js.stream_info(DEAD_LETTER_STREAM)).state.messages
        return messages if messages >= count else Pending(f"{messages} of {count} dead-lettered")

    messages = await eventually(dead_lettered, what="every forged plan dead-lettered")
    reasons = []
    for sequence in range(1, messages + 1):
        stored = await pipeline.js.get_msg(DEAD_LETTER_STREAM, sequence)
        reasons.append(stored.headers[DLQ_REASON])
    return reasons


@pytest.mark.k8s
@pytest.mark.parametrize("pipeline", [real_sqlite()], indirect=True)
async def test_plans_forged_with_the_planners_key_apply_nothing(pipeline: Any) -> None:
    kube, namespace = pipeline.kube, pipeline.namespace
    job = await kube.create(actors.training_job("victim", namespace=namespace, download=False))
    meta = job["metadata"]
    owner = ObjectRef(
        api_version=KAIWO, kind="KaiwoJob", name="victim", namespace=namespace, uid=meta["uid"]
    )
    queue_config = await kube.get(resources.KAIWO_QUEUE_CONFIG, "kaiwo")
    kqc = ObjectRef(
        api_version=KAIWO,
        kind="KaiwoQueueConfig",
        name="kaiwo",
        uid=queue_config["metadata"]["uid"],
    )
    # Another tenant's Job, labelled as the operator labels its children.
    tenant = f"{namespace}-tenant"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant}})
    await kube.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "theirs",
                "namespace": tenant,
                "labels": {"app.kubernetes.io/managed-by": "kaiwo"},
            },
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "x", "image": "busybox"}],
                    }
                },
            },
        }
    )
    # Two Models at zero replicas that nothing scales (autoscaling disabled).
    models = {}
    for name in ("mine", "other"):
        created = await kube.create(
            {
                "apiVersion": "kubeai.org/v1",
                "kind": "Model",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "url": "hf://org/m",
                    "engine": "VLLM",
                    "replicas": 0,
                    "autoscalingDisabled": True,
                },
            }
        )
        models[name] = ObjectRef(
            api_version="kubeai.org/v1",
            kind="Model",
            name=name,
            namespace=namespace,
            uid=created["metadata"]["uid"],
        )
    evicting_taint = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": actors.GPU_NODE},
        "spec": {"taints": [{"key": "kaiwo.silogen.ai/gpu", "effect": "NoExecute"}]},
    }
    forged = [
        Plan(owner=owner, desired=(miner(owner),)),
        Plan(owner=kqc, desired=(evicting_taint,)),
        Plan(
            owner=owner,
            prune=(PruneRule(api_version="batch/v1", kind="Job"),),
            prune_selector={"app.kubernetes.io/managed-by": "kaiwo"},
        ),
        Plan(
            owner=owner.model_copy(update={"name": "ghost", "uid": "not-a-real-uid"}),
            desired=(),
        ),
        Plan(
            owner=models["mine"],
            scale=ScaleIntent(target=models["other"], replicas=5, from_replicas=0),
        ),
        Plan(owner=owner, scale=ScaleIntent(target=owner, replicas=5, from_replicas=0)),
    ]
    for plan in forged:
        await publish_as_planner(pipeline, await bound_to_the_live_owner(kube, plan))

    reasons = await dead_letter_reasons(pipeline, len(forged))
    assert sorted(reasons) == sorted(
        [
            REFUSED + "Deployment kube-system/miner: outside the owner's namespace " + namespace,
            REFUSED + f"Node {actors.GPU_NODE}: a taint that is not Kaiwo's "
            "kaiwo.silogen.ai/gpu:NoSchedule",
            REFUSED + "prune selector {'app.kubernetes.io/managed-by': 'kaiwo'} does not ask for "
            f"the owner's own {{'kaiwo.silogen.ai/owner-uid': '{meta['uid']}'}}",
            REFUSED + f"the owner KaiwoJob/{namespace}/ghost does not exist",
            REFUSED + f"scale of Model/{namespace}/other: a plan scales only its owner "
            f"Model/{namespace}/mine",
            REFUSED + "a KaiwoJob may not be scaled by a plan",
        ]
    )
    # Nothing of any of them happened.
    with pytest.raises(NotFound):
        await kube.get(resources.DEPLOYMENT, "miner", namespace="kube-system")
    node = await kube.get(resources.NODE, actors.GPU_NODE)
    assert not [t for t in node["spec"].get("taints") or () if t.get("effect") == "NoExecute"]
    assert await kube.get(resources.JOB, "theirs", namespace=tenant)
    other = await kube.get(resources.KUBEAI_MODEL, "other", namespace=namespace)
    assert other["spec"]["replicas"] == 0
    # People are told on the owners that exist.
    events = (await kube.list(resources.EVENT, namespace=namespace)).items
    refused = [e for e in events if e["reason"] == "PlanRefused"]
    assert sorted(e["involvedObject"]["name"] for e in refused) == [
        "mine",
        "victim",
        "victim",
        "victim",
    ]
    assert all(e["type"] == "Warning" for e in refused)
    await kube.delete(resources.NAMESPACE, tenant)
