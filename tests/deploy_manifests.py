"""deploy/ rendered as a platform team renders it: kustomize (``kubectl kustomize``) and the
Helm chart (Helm's own library, helm-sdkpy: no helm binary ships on PyPI or in Debian), over a
copy of deploy/ with NATS credentials generated as ``make nats-credentials`` generates them."""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from kaiwo_cli.commands.nats import chart_values
from kaiwo_contracts.events.permissions import operator_identities
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials

from tests.stack_programs import stack_program

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
DEPLOY: Final = REPO_ROOT / "deploy"
KAIWO: Final = REPO_ROOT / ".venv" / "bin" / "kaiwo"
HELM_SDK: Final = REPO_ROOT / ".tools" / "helm-sdkpy"
CHART_CREDENTIALS: Final = "nats-credentials.yaml"
"""Next to the chart, not in it (deploy/helm/): what ``make nats-credentials`` writes."""
KUSTOMIZATIONS: Final = ("base", "scheduler", "overlays/dev", "overlays/production")
EXTERNAL_SCHEDULER: Final = "overlays/production-external-scheduler"
"""A test-only overlay: production with components/external-scheduler."""
MESSENGER: Final = "overlays/production-messenger"
"""A test-only overlay: production with components/messenger."""
NATS_CLIENTS: Final = "overlays/production-nats-clients"
"""A test-only overlay: production with components/nats-clients."""
VLLM_POD_MONITOR: Final = "overlays/production-vllm-pod-monitor"
"""A test-only overlay: production with components/vllm-pod-monitor."""
DEFAULT_QUEUE: Final = "overlays/production-default-queue"
"""A test-only overlay: production with the default queue named ``research`` as
docs/operations.md shows (the KaiwoConfig's field and the planner's setting)."""
DEFAULT_QUEUE_PATCHES: Final = [
    {
        "target": {"group": "config.kaiwo.silogen.ai", "kind": "KaiwoConfig", "name": "kaiwo"},
        "patch": "- {op: add, path: /spec/defaultClusterQueueName, value: research}",
    },
    {
        "target": {"kind": "Deployment", "name": "kaiwo-planner"},
        "patch": "- {op: add, path: /spec/template/spec/containers/0/env/-, "
        "value: {name: KAIWO_DEFAULT_CLUSTER_QUEUE_NAME, value: research}}",
    },
]
DEPLOY_PARTITIONS: Final = 12
"""``KAIWO_BUS_PARTITIONS`` of the manifests and the chart (``make nats-credentials`` passes it)."""


def kubectl() -> str:
    """The built stack's kubectl (``make stack``), whose kustomize renders the overlays."""
    return stack_program("kubectl")


@dataclass(frozen=True, slots=True)
class DeployTree:
    """A copy of deploy/ with generated credentials, ready to render."""

    root: Path

    def kustomize(self, name: str) -> str:
        result = subprocess.run(
            [kubectl(), "kustomize", str(self.root / "k8s" / name)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, f"kubectl kustomize {name}: {result.stderr}"
        return result.stdout

    def objects(self, name: str) -> list[dict[str, Any]]:
        return [o for o in yaml.safe_load_all(self.kustomize(name)) if o]

    @property
    def chart(self) -> Path:
        return self.root / "helm" / "kaiwo"

    def chart_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` with the NATS credentials, as ``helm install -f
        deploy/helm/nats-credentials.yaml -f ...`` merges them (later files win)."""
        credentials = yaml.safe_load((self.root / "helm" / CHART_CREDENTIALS).read_text())
        return merged(credentials, values)


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of two values files: maps merged key by key, anything else replaced."""
    result = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def write_nats_credentials(out: Path, *, http: str | None = None) -> CredentialsDirectory:
    """What `kaiwo nats credentials --out OUT [--http HTTP]` writes, in this process (the same
    library calls, without the CLI's start-up time)."""
    return write_credentials(
        out, operator_identities(bus_topology(partitions=DEPLOY_PARTITIONS)), tls=None, http=http
    )


def deploy_tree(directory: Path) -> DeployTree:
    """Copy deploy/ into ``directory`` and generate the NATS keys the renderings read."""
    root = directory / "deploy"
    shutil.copytree(DEPLOY, root, ignore=shutil.ignore_patterns("nats-credentials"))
    credentials = root / "k8s" / "base" / "nats-credentials"
    written = write_nats_credentials(credentials, http="127.0.0.1:8222")
    # The values file `make nats-credentials` writes for the chart (one generation is enough).
    (root / "helm" / CHART_CREDENTIALS).write_text(chart_values(written))
    test_overlay = root / "k8s" / EXTERNAL_SCHEDULER
    test_overlay.mkdir()
    (test_overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": ["../production"],
                "components": ["../../components/external-scheduler"],
            }
        )
    )
    messenger = root / "k8s" / MESSENGER
    messenger.mkdir()
    (messenger / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {"resources": ["../production"], "components": ["../../components/messenger"]}
        )
    )
    nats_clients = root / "k8s" / NATS_CLIENTS
    nats_clients.mkdir()
    (nats_clients / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {"resources": ["../production"], "components": ["../../components/nats-clients"]}
        )
    )
    pod_monitor = root / "k8s" / VLLM_POD_MONITOR
    pod_monitor.mkdir()
    (pod_monitor / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {"resources": ["../production"], "components": ["../../components/vllm-pod-monitor"]}
        )
    )
    default_queue = root / "k8s" / DEFAULT_QUEUE
    default_queue.mkdir()
    (default_queue / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["../production"], "patches": DEFAULT_QUEUE_PATCHES})
    )
    return DeployTree(root=root)


@functools.cache
def shared_deploy_tree() -> DeployTree:
    """One rendered-ready copy per test session (generating keys costs seconds)."""
    directory = Path(tempfile.mkdtemp(prefix="kaiwo-deploy-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return deploy_tree(directory)


def helm_sdk() -> Any:
    """helm_sdkpy, from where ``make deploy-tools`` installs it (make test and .ci/run do)."""
    assert (HELM_SDK / "helm_sdkpy").is_dir(), f"{HELM_SDK} is missing: run `make deploy-tools`"
    if str(HELM_SDK) not in sys.path:
        sys.path.append(str(HELM_SDK))
    import helm_sdkpy  # type: ignore[import-not-found]

    return helm_sdkpy


def by_kind_and_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}
