"""Hand-written hostile manifests, each with the outcome expected of the operator.

Outcomes, as ``test_hostile_manifests.py`` checks them:

``refused reading``
    ``kaiwo validate`` refuses the file before any model sees it (YAML bombs, size); the
    reason (``expect``) is printed, no traceback.
``field error``
    ``kaiwo validate`` names the field (``expect`` is the field path) and exits 1. The API
    server refuses these with the CRD's schema (types, patterns) before the operator sees
    them; the planner's own parse is lax about JSON types it never receives.
``Valid=False``
    ``kaiwo validate`` names the field, and the planner, given the object as an API server
    could have stored it (an older CRD, a cluster without our schema), plans only a
    ``Valid=False`` condition naming it and a Warning Event.
``bounded children``
    Valid; every child the planner makes has a name and labels of at most 63 characters.
``reference ignored``
    A child in another namespace naming the workload by uid changes nothing of its plan.

The grammar cases (quantities, durations, counts) are also refused by the real API server
with the generated CRDs: ``test_api_server_grammar.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

Outcome = Literal[
    "refused reading", "field error", "Valid=False", "bounded children", "reference ignored"
]
KAIWO = "kaiwo.silogen.ai/v1alpha1"
CONFIG = "config.kaiwo.silogen.ai/v1alpha1"


@dataclass(frozen=True, slots=True)
class HostileManifest:
    """One case: the file's text, what must happen, and what the output must name."""

    name: str
    text: str
    outcome: Outcome
    expect: str
    """The field path (field error, Valid=False) or the words of the refusal."""
    extra: tuple[dict[str, Any], ...] = field(default=())
    """Objects the planner also observes (reference ignored)."""


def job(name: str = "hostile", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {"image": "busybox", **spec},
    }


def service(name: str = "hostile", **spec: Any) -> dict[str, Any]:
    return {**job(name, **spec), "kind": "KaiwoService"}


def config(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG,
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }


def queue_config(quota: Any) -> dict[str, Any]:
    flavors = [{"name": "gpu", "resources": [{"name": "amd.com/gpu", "nominalQuota": quota}]}]
    groups = [{"coveredResources": ["amd.com/gpu"], "flavors": flavors}]
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"clusterQueues": [{"name": "q", "spec": {"resourceGroups": groups}}]},
    }


def in_namespace(document: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {**document, "metadata": {**document["metadata"], "namespace": namespace}}


def data(size: Any) -> dict[str, Any]:
    return {"storageEnabled": True, "data": {"storageSize": size}}


def text(document: Any) -> str:
    return yaml.safe_dump(document, sort_keys=False, width=10_000)


def case(name: str, document: Any, outcome: Outcome, expect: str) -> HostileManifest:
    return HostileManifest(name=name, text=text(document), outcome=outcome, expect=expect)


def _header(name: str) -> str:
    return f"apiVersion: {KAIWO}\nkind: KaiwoJob\nmetadata: {{name: {name}, namespace: ml-team}}\n"


def deep_yaml(depth: int) -> str:
    return _header("deep") + "spec:\n  podTemplateSpecLabels: " + "[" * depth + "]" * depth + "\n"


def billion_laughs() -> str:
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return _header("laughs") + "\n".join(lines) + "\nspec: {image: *a9}\n"


def many_aliases(count: int) -> str:
    labels = "\n".join(f"    l{i}: *v" for i in range(count))
    return _header("aliases") + "spec:\n  image: &v busybox\n  podTemplateSpecLabels:\n" + labels


def forged_child(owner_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "hostile",
            "namespace": "vision",
            "uid": "forged",
            "resourceVersion": "7",
            "ownerReferences": [
                {"apiVersion": KAIWO, "kind": "KaiwoJob", "name": "hostile", "uid": owner_uid}
            ],
        },
        "status": {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]},
    }


LONG = ("long-workload-name-" * 14)[:252] + "z"


def build_corpus() -> list[HostileManifest]:
    """The cases, in the order of the table."""
    return [
        # ---- long names
        case("name 64 chars", job("n" * 64), "bounded children", ""),
        case("name 253 chars", job(LONG), "bounded children", ""),
        case("service name 253", service(LONG), "bounded children", ""),
        case("ray job name 200", job(LONG[:200], ray=True), "bounded children", ""),
        case("user 300 chars", job(user="someone." * 36 + "@amd.com"), "bounded children", ""),
        case("name 253 with data", job(LONG, storage=data("1Gi")), "bounded children", ""),
        case("queue 64 chars", job(clusterQueue="q" * 64), "field error", "spec.clusterQueue"),
        case("priority Bad_", job(priorityClass="Bad_"), "field error", "spec.priorityClass"),
        # ---- names outside Kubernetes' grammar (the API server refuses them too:
        # test_api_server_grammar.py)
        case("name 10,000 chars", job("n" * 10_000), "field error", "metadata.name"),
        case("name zero-width space", job("ab\u200bc"), "field error", "metadata.name"),
        case("name right-to-left", job("ab\u202ec"), "field error", "metadata.name"),
        case("name a path", job("../../etc/passwd"), "field error", "metadata.name"),
        case(
            "namespace ML_Team", in_namespace(job(), "ML_Team"), "field error", "metadata.namespace"
        ),
        # ---- quantities
        case(
            "size 1e100Gi",
            job(storage=data("1e100Gi")),
            "Valid=False",
            "spec.storage.data.storageSize",
        ),
        case("size NaN", job(storage=data("NaN")), "Valid=False", "spec.storage.data.storageSize"),
        case(
            "size -10Gi", job(storage=data("-10Gi")), "Valid=False", "spec.storage.data.storageSize"
        ),
        case(
            "size 1.5.5Gi",
            job(storage=data("1.5.5Gi")),
            "Valid=False",
            "spec.storage.data.storageSize",
        ),
        case(
            "size 1e100", job(storage=data("1e100")), "Valid=False", "spec.storage.data.storageSize"
        ),
        case(
            "hf size Infinity",
            job(storage={"huggingFace": {"storageSize": "Infinity"}}),
            "Valid=False",
            "spec.storage.huggingFace.storageSize",
        ),
        case(
            "memory -1",
            job(resources={"requests": {"memory": "-1"}}),
            "Valid=False",
            "spec.resources.requests.memory",
        ),
        case(
            "cpu 1gi",
            job(resources={"limits": {"cpu": "1gi"}}),
            "Valid=False",
            "spec.resources.limits.cpu",
        ),
        case(
            "cpu -4 integer",
            job(resources={"limits": {"cpu": -4}}),
            "Valid=False",
            "spec.resources.limits.cpu",
        ),
        case(
            "head memory lots",
            config(ray={"headPodMemory": "lots"}),
            "field error",
            "spec.ray.headPodMemory",
        ),
        case(
            "quota -8",
            queue_config(-8),
            "Valid=False",
            "spec.clusterQueues[0].spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        ),
        case(
            "quota 9Ei",
            queue_config("9Ei"),
            "Valid=False",
            "spec.clusterQueues[0].spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        ),
        # ---- durations
        case(
            "duration 99999999999999h",
            job(duration="99999999999999h"),
            "Valid=False",
            "spec.duration",
        ),
        case("duration 1d", job(duration="1d"), "Valid=False", "spec.duration"),
        case("duration -1h", job(duration="-1h"), "Valid=False", "spec.duration"),
        case("duration 1.5h", job(duration="1.5h"), "Valid=False", "spec.duration"),
        case(
            "threshold overflow",
            config(scheduling={"pendingThresholdForPreemption": "99999999999999h"}),
            "field error",
            "spec.scheduling.pendingThresholdForPreemption",
        ),
        case(
            "terminate after 300ms",
            config(resourceMonitoring={"terminateUnderutilizedAfter": "300ms"}),
            "field error",
            "spec.resourceMonitoring.terminateUnderutilizedAfter",
        ),
        case(
            "grace period forever",
            config(gpuPreemption={"defaultGracePeriod": "forever"}),
            "field error",
            "spec.gpuPreemption.defaultGracePeriod",
        ),
        # ---- overflow
        case("replicas 2**63", job(replicas=2**63), "Valid=False", "spec.replicas"),
        case("gpus 2**63-1", job(gpus=2**63 - 1), "Valid=False", "spec.gpus"),
        case(
            "gpusPerReplica 2**31",
            job(gpusPerReplica=2**31, replicas=1),
            "Valid=False",
            "spec.gpusPerReplica",
        ),
        HostileManifest(
            "replicas '2**63' text",
            _header("pow") + "spec:\n  replicas: 2**63\n",
            "field error",
            "spec.replicas",
        ),
        HostileManifest(
            "replicas 0x and 200,000 f",
            _header("hex") + "spec:\n  replicas: 0x" + "f" * 200_000 + "\n",
            "refused reading",
            "an integer of 200000 digits",
        ),
        case(
            "gpusPerReplica 0",
            job(gpusPerReplica=0, replicas=1),
            "Valid=False",
            "spec.gpusPerReplica",
        ),
        case("gpuVendor newline", job(gpuVendor="amd\nx"), "Valid=False", "spec.gpuVendor"),
        case("gpuVendor final newline", job(gpuVendor="amd\n"), "Valid=False", "spec.gpuVendor"),
        case(
            "queue final newline", job(clusterQueue="kaiwo\n"), "Valid=False", "spec.clusterQueue"
        ),
        HostileManifest(
            "replicas 1e400",
            _header("inf") + "spec:\n  replicas: 1e400\n",
            "field error",
            "spec.replicas",
        ),
        # ---- YAML bombs
        HostileManifest("depth 900", deep_yaml(900), "refused reading", "nested more than 100"),
        HostileManifest("depth 5000", deep_yaml(5000), "refused reading", "nested more than 100"),
        HostileManifest("billion laughs", billion_laughs(), "refused reading", "an alias bomb"),
        HostileManifest(
            "150 aliases", many_aliases(150), "refused reading", "more than 100 YAML aliases"
        ),
        HostileManifest(
            "integer 5000 digits",
            _header("digits") + "spec:\n  replicas: " + "9" * 5000 + "\n",
            "refused reading",
            "an integer of 5000 digits",
        ),
        HostileManifest(
            "file 4 MiB",
            _header("big") + "spec:\n  image: " + "x" * (4 * 1024 * 1024) + "\n",
            "refused reading",
            "larger than 3,145,728 bytes",
        ),
        HostileManifest("not YAML", "kind: [unclosed\n", "refused reading", "not valid YAML"),
        # ---- wrong types
        case("gpus '4'", job(gpus="4"), "field error", "spec.gpus"),
        case("replicas true", job(replicas=True), "field error", "spec.replicas"),
        case("image 42", job(image=42), "Valid=False", "spec.image"),
        case("env a map", job(env={"A": "b"}), "Valid=False", "spec.env"),
        case("a list document", [job()], "field error", ""),
        # ---- unknown fields
        case("spec.gpu typo", job(gpu=4), "Valid=False", "spec.gpu"),
        case("storage.dat typo", job(storage={"dat": {}}), "Valid=False", "spec.storage.dat"),
        # ---- bad enum values
        case(
            "accessMode ReadWriteAlways",
            job(storage={"accessMode": "ReadWriteAlways"}),
            "Valid=False",
            "spec.storage.accessMode",
        ),
        # ---- missing required fields
        case(
            "no apiVersion",
            {k: v for k, v in job().items() if k != "apiVersion"},
            "field error",
            "apiVersion",
        ),
        case("unknown kind", {**job(), "kind": "KaiwoJobb"}, "field error", "kind"),
        case(
            "secret volume without mountPath",
            job(secretVolumes=[{"name": "s", "secretName": "s"}]),
            "Valid=False",
            "spec.secretVolumes[0].mountPath",
        ),
        case(
            "s3 download without bucket",
            job(
                storage={
                    "storageEnabled": True,
                    "data": {
                        "storageSize": "1Gi",
                        "download": {"s3": [{"endpointUrl": "http://s3", "buckets": [{}]}]},
                    },
                }
            ),
            "Valid=False",
            "spec.storage.data.download.s3[0].buckets[0].name",
        ),
        # ---- cross-namespace ownerReferences
        HostileManifest(
            "forged child in vision",
            text(job()),
            "reference ignored",
            "",
            extra=(forged_child("hostile-uid"),),
        ),
    ]
