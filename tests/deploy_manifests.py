"""deploy/k8s rendered as a platform team renders it (``kubectl kustomize``), over a copy of
deploy/ with NATS credentials generated the way ``make nats-credentials`` generates them."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
DEPLOY: Final = REPO_ROOT / "deploy"
KAIWO: Final = REPO_ROOT / ".venv" / "bin" / "kaiwo"
KUSTOMIZATIONS: Final = ("base", "overlays/dev", "overlays/production")
EXTERNAL_SCHEDULER: Final = "overlays/production-external-scheduler"
"""A test-only overlay: production with components/external-scheduler."""


def kubectl() -> str:
    found = shutil.which("kubectl")
    assert found, "kubectl is needed to render kustomize (.ci/run installs it)"
    return found


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


def deploy_tree(directory: Path) -> DeployTree:
    """Copy deploy/ into ``directory`` and generate the NATS keys the renderings read."""
    root = directory / "deploy"
    shutil.copytree(DEPLOY, root, ignore=shutil.ignore_patterns("nats-credentials"))
    credentials = root / "k8s" / "base" / "nats-credentials"
    subprocess.run(
        [str(KAIWO), "nats", "credentials", "--out", str(credentials), "--http", "127.0.0.1:8222"],
        check=True,
        capture_output=True,
    )
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
    return DeployTree(root=root)


def by_kind_and_name(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}
