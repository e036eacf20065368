"""The executor's ValidatingAdmissionPolicies (deploy/k8s/base/admission-policy.yaml), read
statically: each one enforced (Deny, failing closed) for the executor's ServiceAccount only,
every write the executor's role grants checked by a policy of its own, and the chart shipping
the same objects. What they refuse is tested on a real API server:
tests/integration/rbac/test_admission_policy.py; that the operator's own work passes them:
tests/integration/rbac/test_least_privilege.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from tests.deploy_manifests import shared_deploy_tree
from tests.unit.deploy.test_rbac import writes

DEPLOY: Final = Path(__file__).resolve().parents[3] / "deploy"
POLICY: Final = DEPLOY / "k8s" / "base" / "admission-policy.yaml"
CHART: Final = DEPLOY / "helm" / "kaiwo"
EXECUTOR: Final = "system:serviceaccount:kaiwo-system:kaiwo-executor"
NAMESPACES_POLICY: Final = "kaiwo-executor-namespaces"
GPU_PREEMPTION_POLICY: Final = "kaiwo-executor-gpu-preemption"
NOT_A_GPU_PREEMPTION: Final = "not-a-gpu-preemption"

CHECKED_BY: Final[dict[tuple[str, str], str]] = {
    # Children of workloads and Models, and the KaiwoQueueConfig's Kueue objects: only the
    # operator's (managed-by, a Kaiwo owner as controller with its uid), never adopted.
    **dict.fromkeys(
        (
            ("", "persistentvolumeclaims"),
            ("", "configmaps"),
            ("", "services"),
            ("", "pods"),
            ("batch", "jobs"),
            ("apps", "deployments"),
            ("ray.io", "rayjobs"),
            ("workload.codeflare.dev", "appwrappers"),
            ("gateway.networking.k8s.io", "httproutes"),
            ("rbac.authorization.k8s.io", "roles"),
            ("rbac.authorization.k8s.io", "rolebindings"),
            ("kueue.x-k8s.io", "resourceflavors"),
            ("kueue.x-k8s.io", "clusterqueues"),
            ("kueue.x-k8s.io", "localqueues"),
            ("kueue.x-k8s.io", "workloadpriorityclasses"),
            ("kueue.x-k8s.io", "topologies"),
        ),
        "kaiwo-executor-ownership",
    ),
    # GPU idle preemption of workloads no Kaiwo kind owns (decision 0047): kinds the operator
    # never makes, written only to preempt an opted-in one.
    ("apps", "statefulsets"): GPU_PREEMPTION_POLICY,
    ("ray.io", "rayclusters"): GPU_PREEMPTION_POLICY,
    ("", "nodes"): "kaiwo-executor-nodes",
    ("config.kaiwo.silogen.ai", "kaiwoconfigs"): "kaiwo-executor-owners",
    ("kaiwo.silogen.ai", "kaiwoqueueconfigs"): "kaiwo-executor-owners",
    ("kubeai.org", "models"): "kaiwo-executor-owners",
    # Granted for the AppWrapper webhook's access check only (decision 0184): refused outright.
    ("ray.io", "rayservices"): "kaiwo-executor-wrapped-only",
}
"""The policy that checks what each write of the executor's role may contain, by hand."""
NAMESPACE_ONLY: Final[dict[tuple[str, str], str]] = {
    ("", "events"): "about Kaiwo's owners only, in no system namespace (namespaces policy)",
    ("kaiwo.silogen.ai", "kaiwojobs/status"): "the owner's own status (namespaces policy)",
    ("kaiwo.silogen.ai", "kaiwoservices/status"): "the owner's own status (namespaces policy)",
    ("kubeai.org", "models/status"): "the owner's own status (namespaces policy)",
    ("kubeai.org", "models/scale"): "the owner's replicas (namespaces policy)",
    ("kaiwo.silogen.ai", "kaiwoqueueconfigs/status"): "RBAC grants it for `kaiwo` only",
    ("kaiwo.silogen.ai", "gpuworkloads"): "the operator's own record (namespaces policy)",
    ("kaiwo.silogen.ai", "gpuworkloads/status"): "the record's status (namespaces policy)",
    **{
        (group, f"{kind}/finalizers"): "never a request: checked within a child's write"
        for group, kind in (
            ("kaiwo.silogen.ai", "kaiwojobs"),
            ("kaiwo.silogen.ai", "kaiwoservices"),
            ("kaiwo.silogen.ai", "kaiwoqueueconfigs"),
            ("kubeai.org", "models"),
        )
    },
}
"""Writes no policy but the namespaces one looks into, each with the reason."""


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def policies() -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d
        for d in documents(POLICY)
        if d["kind"] == "ValidatingAdmissionPolicy"
    }


def matched(policy: dict[str, Any]) -> set[tuple[str, str]]:
    """(group, resource) pairs a policy's resource rules name (no wildcards)."""
    return {
        (group, resource)
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def test_every_policy_binds_the_executor_alone_denies_and_fails_closed() -> None:
    bindings = {
        d["spec"]["policyName"]: d
        for d in documents(POLICY)
        if d["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    assert sorted(bindings) == sorted(policies())
    for name, policy in policies().items():
        spec = policy["spec"]
        assert spec["failurePolicy"] == "Fail", name
        assert spec["matchConditions"][0] == {
            "name": "the-executor",
            "expression": f"request.userInfo.username == '{EXECUTOR}'",
        }, name
        assert [c["name"] for c in spec["matchConditions"][1:]] == EXTRA_CONDITIONS.get(name, []), (
            name
        )
        assert {v["reason"] for v in spec["validations"]} == {"Forbidden"}, name
        binding = bindings[name]["spec"]
        assert binding["validationActions"] == ["Deny"], name
        assert binding.get("paramRef") == PARAMS.get(name) and "matchResources" not in binding, name


TAINT_KEY_POLICY: Final = "kaiwo-executor-nodes-taint-key"
PARAMS: Final = {
    # The GPU taint key allowed on Nodes is the KaiwoConfig's own, read by the API server
    # (decision 0211). The API server resolves a param before the match conditions, so a
    # missing KaiwoConfig with Deny refused every identity's Node change: this check alone is
    # lifted then, the key-free rules of kaiwo-executor-nodes still hold (decision 0268).
    TAINT_KEY_POLICY: {"name": "kaiwo", "parameterNotFoundAction": "Allow"},
}


def test_the_nodes_taint_key_policy_alone_reads_the_kaiwo_config() -> None:
    spec = policies()[TAINT_KEY_POLICY]["spec"]
    assert spec["paramKind"] == {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
    }
    [key] = [v["expression"] for v in spec["variables"] if v["name"] == "gpuTaintKey"]
    assert key == "string(params.?spec.?nodes.?defaultGpuTaintKey.orValue('kaiwo.silogen.ai/gpu'))"
    assert matched(policies()[TAINT_KEY_POLICY]) == matched(policies()["kaiwo-executor-nodes"])
    others = [p for name, p in policies().items() if name != TAINT_KEY_POLICY]
    assert not any("paramKind" in p["spec"] or "params" in str(p["spec"]) for p in others)


EXTRA_CONDITIONS: Final = {
    "kaiwo-executor-ownership": [NOT_A_GPU_PREEMPTION],
    "kaiwo-executor-pods": [NOT_A_GPU_PREEMPTION],
    GPU_PREEMPTION_POLICY: ["a-gpu-preemption-or-a-kind-only-it-writes"],
}


def test_a_gpu_preemption_is_judged_by_its_own_policy_alone() -> None:
    """The ownership and pods policies leave out exactly the requests the GPU-preemption
    policy takes in (an update or delete of a root kind's object the operator did not make
    and nothing controls), and that policy requires the same of every request it judges."""
    every = policies()
    [excluded] = [
        c["expression"]
        for name in ("kaiwo-executor-ownership", "kaiwo-executor-pods")
        for c in every[name]["spec"]["matchConditions"]
        if c["name"] == NOT_A_GPU_PREEMPTION
    ][:1]
    assert excluded.startswith("!(") and excluded.endswith(")")
    foreign = excluded[2:-1]
    for name in ("kaiwo-executor-ownership", "kaiwo-executor-pods"):
        conditions = {c["name"]: c["expression"] for c in every[name]["spec"]["matchConditions"]}
        assert conditions[NOT_A_GPU_PREEMPTION] == excluded, name
    spec = every[GPU_PREEMPTION_POLICY]["spec"]
    assert spec["matchConditions"][1]["expression"].endswith(f"|| ({foreign})")
    assert spec["validations"][0]["expression"] == foreign
    assert f"&& !({foreign})" in every[NAMESPACES_POLICY]["spec"]["variables"][0]["expression"]


def test_the_namespaces_policy_sees_every_namespaced_write() -> None:
    [rule] = policies()[NAMESPACES_POLICY]["spec"]["matchConstraints"]["resourceRules"]
    assert rule == {
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "resources": ["*/*"],
        "operations": ["CREATE", "UPDATE", "DELETE"],
        "scope": "Namespaced",
    }


def test_every_write_the_executor_may_make_is_checked_by_a_policy() -> None:
    """A grant added to the executor's role without a policy for it fails here."""
    granted = set(writes("executor"))
    assert set(CHECKED_BY) | set(NAMESPACE_ONLY) == granted
    for write, name in CHECKED_BY.items():
        assert write in matched(policies()[name]), (write, name)


def test_the_chart_ships_the_same_policies() -> None:
    """Only the operator's namespace (the release's) is templated."""
    template = (CHART / "templates" / "admission-policy.yaml").read_text()
    rendered = template.replace("{{ .Release.Namespace }}", "kaiwo-system")
    body = rendered[rendered.index("apiVersion:") :]
    assert [d for d in yaml.safe_load_all(body) if d] == documents(POLICY)


def test_kustomize_renders_the_policies_as_written() -> None:
    """Its YAML round trip changes a folded block with more-indented lines (blank lines
    appear): multi-line CEL is written as literal blocks."""
    rendered = {
        d["metadata"]["name"] + d["kind"]: d
        for d in shared_deploy_tree().objects("overlays/production")
        if d["kind"].startswith("ValidatingAdmissionPolicy")
    }
    for document in documents(POLICY):
        found = rendered[document["metadata"]["name"] + document["kind"]]
        found["metadata"].pop("namespace")  # kustomize sets it; the API server drops it
        assert found == document


def test_the_chart_never_holds_keys_among_its_own_files() -> None:
    """``helm package`` archives the chart's files: the NATS keys come as values
    (tests/integration/deploy/test_helm_chart.py packages a chart with keys left in it)."""
    ignored = (CHART / ".helmignore").read_text().splitlines()
    assert {"nats-credentials/", "*.nk"} <= set(ignored)
    for template in (CHART / "templates").iterdir():
        assert ".Files" not in template.read_text(), template.name
