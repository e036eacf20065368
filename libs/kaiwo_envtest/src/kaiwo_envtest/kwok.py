"""kwok as the kubelet of every simulated node: our own Stages (kwok's Stage API, written here
rather than taken from kwok's examples) and the command line that runs it.

Nodes are created by whoever sets the plane up (the tests, ``kaiwo demo``), with their labels
and ``status.capacity``; kwok manages those matching :attr:`KwokOptions.node_selector`, renews
their Leases (so the node lifecycle controller keeps them Ready) and plays their kubelets
through these Stages:

* ``node-initialize``: a node not yet Ready reports Ready, its allocatable equal to its
  capacity, an address and a kubelet endpoint (kwok's server, unless the node already names
  one, e.g. the sandbox's container-log endpoint);
* ``node-heartbeat``: a Ready node posts its status again every few minutes, as a kubelet
  does when its Lease carries the heartbeat;
* ``pod-start``: a pod bound to the node runs and is Ready ``start_seconds`` later;
* ``pod-succeed`` / ``pod-fail``: a running pod a Job owns ends after its run time (the pod's
  annotation :data:`RUN_SECONDS_ANNOTATION`, in seconds; ``download_seconds`` for a download
  Job's pod; else ``run_seconds``), Succeeded, or Failed with exit code 1 and the annotation
  :data:`FAIL_ANNOTATION`'s text as the container's message when that is set. Other pods (a
  Deployment's, a RayCluster's) run until deleted;
* ``pod-stop`` and ``pod-delete``: a pod being deleted stops at once (its containers killed:
  exit code 137) and, once no finalizer holds it, is removed, as a kubelet removes it.

The annotations are the sandbox's (``kaiwo_sandbox.lifecycle``), so one scenario drives the
simulated kubelet and kwok alike. Every delay is multiplied by ``time_scale``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

KWOK_API: Final = "kwok.x-k8s.io/v1alpha1"
RUN_SECONDS_ANNOTATION: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
FAIL_ANNOTATION: Final = "sandbox.kaiwo.silogen.ai/fail"
WORKLOAD_TYPE_LABEL: Final = "kaiwo.silogen.ai/type"
DOWNLOADER: Final = "downloader"
HEARTBEAT_SECONDS: Final = 300.0
LEASE_SECONDS: Final = 40
POD_CIDR: Final = "10.244.0.0/16"
KILLED_EXIT_CODE: Final = 137


@dataclass(frozen=True, slots=True)
class KwokOptions:
    node_selector: str = "kwok.x-k8s.io/node=fake"
    """The label selector of the nodes kwok plays the kubelet of."""
    start_seconds: float = 1.0
    run_seconds: float = 20.0
    download_seconds: float = 3.0
    time_scale: float = 1.0


def _milliseconds(seconds: float, scale: float) -> int:
    return max(0, round(seconds * scale * 1000))


def run_time_expression(options: KwokOptions) -> str:
    """The jq expression kwok evaluates for a pod's run time (a Go duration): the run-seconds
    annotation (scaled), else the download time for a download Job's pod; no output (kwok
    then takes the stage's default) for other pods or a value that is not a number."""
    annotation = f'.metadata.annotations["{RUN_SECONDS_ANNOTATION}"]'
    download = f"{options.download_seconds * options.time_scale:g}s"
    return (
        f'({annotation} | tonumber? | . * {options.time_scale:g} | tostring + "s"), '
        f'(if .metadata.labels["{WORKLOAD_TYPE_LABEL}"] == "{DOWNLOADER}" '
        f'then "{download}" else empty end)'
    )


def _stage(name: str, kind: str, selector: Sequence[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KWOK_API,
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": kind},
            "selector": {"matchExpressions": list(selector)},
            **spec,
        },
    }


def _is(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _is_not(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "NotIn", "values": list(values)}


def _exists(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def _absent(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "DoesNotExist"}


READY_STATUS: Final = '.status.conditions.[] | select( .type == "Ready" ) | .status'
NOT_DELETING: Final = _absent(".metadata.deletionTimestamp")

NODE_STATUS: Final = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
{{ if not .status.addresses }}
addresses:
- address: {{ NodeIP | Quote }}
  type: InternalIP
{{ end }}
{{ if not .status.daemonEndpoints }}
{{ with NodePort }}
daemonEndpoints:
  kubeletEndpoint:
    Port: {{ . }}
{{ end }}
{{ end }}
{{ with .status.capacity }}
allocatable:
{{ YAML . 1 }}
{{ end }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
phase: Running
"""

NODE_HEARTBEAT: Final = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  type: {{ .type | Quote }}
{{ end }}
"""

POD_RUNNING: Final = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
{{ if .spec.initContainers }}
initContainerStatuses:
{{ range .spec.initContainers }}
- image: {{ .image | Quote }}
  imageID: ""
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  imageID: ""
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""


def _pod_ended(*, phase: str, exit_code: str, reason: str, message: str) -> str:
    """The status of a pod whose containers exited (``exit_code`` and ``message`` are
    template expressions, evaluated for each container: the pod is ``$root``)."""
    return f"""\
{{{{ $now := Now }}}}
{{{{ $root := . }}}}
conditions:
- lastTransitionTime: {{{{ $now | Quote }}}}
  reason: PodCompleted
  status: "False"
  type: ContainersReady
- lastTransitionTime: {{{{ $now | Quote }}}}
  reason: PodCompleted
  status: "False"
  type: Ready
containerStatuses:
{{{{ range .spec.containers }}}}
- image: {{{{ .image | Quote }}}}
  imageID: ""
  name: {{{{ .name | Quote }}}}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: {exit_code}
      reason: {reason}
      message: {message}
      startedAt: {{{{ or $root.status.startTime $now | Quote }}}}
      finishedAt: {{{{ $now | Quote }}}}
{{{{ end }}}}
phase: {phase}
"""


POD_SUCCEEDED: Final = _pod_ended(
    phase="Succeeded", exit_code="0", reason="Completed", message='""'
)
POD_FAILED: Final = _pod_ended(
    phase="Failed",
    exit_code="1",
    reason="Error",
    message=f'{{{{ index $root.metadata.annotations "{FAIL_ANNOTATION}" | Quote }}}}',
)
POD_KILLED: Final = _pod_ended(
    phase="Failed", exit_code=str(KILLED_EXIT_CODE), reason="Error", message='"killed: deleted"'
)


def stages(options: KwokOptions) -> list[dict[str, Any]]:
    """The Stages of the module's docstring, for ``options``."""
    scale = options.time_scale
    owned_by_job = _is(".metadata.ownerReferences.[].kind", "Job")
    running = _is(".status.phase", "Running")
    run_delay = {
        "durationMilliseconds": _milliseconds(options.run_seconds, scale),
        "durationFrom": {"expressionFrom": run_time_expression(options)},
    }
    return [
        _stage(
            "node-initialize",
            "Node",
            [_is_not(READY_STATUS, "True")],
            next={"statusTemplate": NODE_STATUS},
        ),
        _stage(
            "node-heartbeat",
            "Node",
            [_is(".status.phase", "Running"), _is(READY_STATUS, "True")],
            delay={"durationMilliseconds": _milliseconds(HEARTBEAT_SECONDS, 1.0)},
            next={"statusTemplate": NODE_HEARTBEAT},
        ),
        _stage(
            "pod-start",
            "Pod",
            [NOT_DELETING, _is(".status.phase", "Pending"), _exists(".spec.nodeName")],
            delay={"durationMilliseconds": _milliseconds(options.start_seconds, scale)},
            next={"statusTemplate": POD_RUNNING},
        ),
        _stage(
            "pod-succeed",
            "Pod",
            [NOT_DELETING, running, owned_by_job, _absent(_annotation(FAIL_ANNOTATION))],
            delay=run_delay,
            next={"statusTemplate": POD_SUCCEEDED},
        ),
        _stage(
            "pod-fail",
            "Pod",
            [NOT_DELETING, running, owned_by_job, _exists(_annotation(FAIL_ANNOTATION))],
            delay=run_delay,
            next={"statusTemplate": POD_FAILED},
        ),
        _stage(
            "pod-stop",
            "Pod",
            [_exists(".metadata.deletionTimestamp"), _is(".status.phase", "Pending", "Running")],
            next={"statusTemplate": POD_KILLED},
        ),
        _stage(
            "pod-delete",
            "Pod",
            [
                _exists(".metadata.deletionTimestamp"),
                _absent(".metadata.finalizers"),
                _is_not(".status.phase", "Pending", "Running"),
            ],
            next={"delete": True},
        ),
    ]


def _annotation(key: str) -> str:
    return f'.metadata.annotations["{key}"]'


def kwok_flags(
    *, kubeconfig: Path, configuration: Path, port: int, options: KwokOptions
) -> list[str]:
    """kwok's command line: only our configuration (never ``~/.kwok``), only the selected
    nodes, its kubelet server on loopback, node Leases kept."""
    return [
        f"--config={configuration}",
        f"--kubeconfig={kubeconfig}",
        f"--manage-nodes-with-label-selector={options.node_selector}",
        "--manage-all-nodes=false",
        f"--server-address=127.0.0.1:{port}",
        f"--node-port={port}",
        "--node-ip=127.0.0.1",
        f"--cidr={POD_CIDR}",
        f"--node-lease-duration-seconds={LEASE_SECONDS}",
    ]
