"""A throw-away Kubernetes control plane for tests (what controller-runtime calls envtest).

``with ControlPlane(ControlPlaneOptions(binaries=find_binaries())) as plane:`` starts etcd and
kube-apiserver (and the kube-controller-manager with ``controller_manager=True``) from the
stack the project builds from pinned Go modules (:mod:`kaiwo_envtest.stack`, ``make stack``)
or from ``KAIWO_ENVTEST_ASSETS``; ``plane.kubeconfig`` is an administrator's
kubeconfig; with ``audit=True``, ``plane.audit_log`` counts the write requests each client
made (and holds every request of the user groups in ``audit_every_request_of``).
On request it also runs the kube-scheduler with a given configuration
(:mod:`kaiwo_envtest.scheduler`), kwok as the kubelet of selected nodes with our own Stages
(:class:`KwokOptions`), the Kueue manager with its webhooks and conversion
(:class:`KueueOptions`), the KubeRay operator with a stand-in for the Ray processes it asks
(:mod:`kaiwo_envtest.ray_head`), and the AppWrapper controller with its webhooks
(:mod:`kaiwo_envtest.appwrapper`).
``python -m kaiwo_envtest`` runs one until interrupted.
"""

from kaiwo_envtest.assets import (
    ASSETS_VARIABLE,
    CACHE_VARIABLE,
    ArchiveStamp,
    Assets,
    AssetsNotFoundError,
    Binaries,
    binaries_in,
    cache_key,
    default_cache_root,
    find_binaries,
    unpack,
)
from kaiwo_envtest.audit import (
    AUDIT_POLICY,
    AuditEvent,
    AuditLog,
    audit_policy,
    count_writes,
    parse_event,
    parse_request,
)
from kaiwo_envtest.control_plane import ControlPlane, ControlPlaneOptions
from kaiwo_envtest.kubeconfig import kubeconfig_document, write_kubeconfig
from kaiwo_envtest.kueue import KueueOptions
from kaiwo_envtest.kwok import KwokOptions
from kaiwo_envtest.pki import Credentials, Pki, client_credentials, make_pki, subject
from kaiwo_envtest.processes import ControlPlaneError
from kaiwo_envtest.stack import (
    BuiltStack,
    StackBuildError,
    StackNotBuiltError,
    build_stack,
    built_stack,
)

__all__ = [
    "ASSETS_VARIABLE",
    "AUDIT_POLICY",
    "CACHE_VARIABLE",
    "ArchiveStamp",
    "Assets",
    "AssetsNotFoundError",
    "AuditEvent",
    "AuditLog",
    "Binaries",
    "BuiltStack",
    "ControlPlane",
    "ControlPlaneError",
    "ControlPlaneOptions",
    "Credentials",
    "KueueOptions",
    "KwokOptions",
    "Pki",
    "StackBuildError",
    "StackNotBuiltError",
    "audit_policy",
    "binaries_in",
    "build_stack",
    "built_stack",
    "cache_key",
    "client_credentials",
    "count_writes",
    "default_cache_root",
    "find_binaries",
    "kubeconfig_document",
    "make_pki",
    "parse_event",
    "parse_request",
    "subject",
    "unpack",
    "write_kubeconfig",
]
