"""A sandbox cluster: simulated controllers that make a bare API server behave like a cluster.

An API server alone (the fake, or envtest's kube-apiserver) stores objects but nothing acts on
them. The sandbox plays the missing parts, talking to the API server only through
:class:`~kaiwo_sandbox.cluster_port.SandboxCluster` (the few calls it makes, declared there):

* :mod:`kaiwo_sandbox.fleet`: the nodes (GPU vendor labels and capacity as the GPU operators
  set them);
* :mod:`kaiwo_sandbox.admission` and :mod:`kaiwo_sandbox.kueue`: Kueue-style admission against
  the ClusterQueues' nominal quota;
* :mod:`kaiwo_sandbox.lifecycle` and :mod:`kaiwo_sandbox.kubelet`: the Job and Deployment
  controllers, a scheduler and a kubelet, run for a configurable time;
* :mod:`kaiwo_sandbox.volumes`: PersistentVolumeClaims become Bound;
* :mod:`kaiwo_sandbox.gpu_metrics`: GPU utilization on a Prometheus-compatible endpoint.

Everything it does is a simulation; nothing runs.
"""

from kaiwo_sandbox.fleet import DEFAULT_FLEET, NodeSpec, parse_fleet
from kaiwo_sandbox.sandbox import Sandbox, SandboxOptions

__all__ = ["DEFAULT_FLEET", "NodeSpec", "Sandbox", "SandboxOptions", "parse_fleet"]
