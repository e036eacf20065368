"""Builders for the children planners' tests: workloads, configs and expected manifests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoservice import KaiwoService

EXPECTED_DIR = Path(__file__).parent / "expected"


def _metadata(name: str, namespace: str, uid: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "uid": uid, **extra}


@pytest.fixture
def make_job() -> Callable[..., KaiwoJob]:
    """``make_job(spec={...}, name=..., namespace=..., uid=..., metadata={...})``."""

    def build(
        spec: dict[str, Any] | None = None,
        *,
        name: str = "train",
        namespace: str = "team-a",
        uid: str = "uid-1",
        metadata: dict[str, Any] | None = None,
    ) -> KaiwoJob:
        return KaiwoJob.from_wire(
            {"metadata": _metadata(name, namespace, uid, metadata or {}), "spec": spec or {}}
        )

    return build


@pytest.fixture
def make_service() -> Callable[..., KaiwoService]:
    def build(
        spec: dict[str, Any] | None = None,
        *,
        name: str = "chat",
        namespace: str = "team-a",
        uid: str = "uid-2",
        metadata: dict[str, Any] | None = None,
    ) -> KaiwoService:
        return KaiwoService.from_wire(
            {"metadata": _metadata(name, namespace, uid, metadata or {}), "spec": spec or {}}
        )

    return build


@pytest.fixture
def make_config() -> Callable[..., KaiwoConfig]:
    def build(spec: dict[str, Any] | None = None) -> KaiwoConfig:
        return KaiwoConfig.from_wire({"metadata": {"name": "kaiwo"}, "spec": spec or {}})

    return build


@pytest.fixture
def make_namespace_config() -> Callable[..., AIMNamespaceConfig]:
    def build(spec: dict[str, Any], *, namespace: str = "team-a") -> AIMNamespaceConfig:
        return AIMNamespaceConfig.from_wire(
            {"metadata": {"name": "aim", "namespace": namespace}, "spec": spec}
        )

    return build


@pytest.fixture
def expected() -> Callable[[str], list[dict[str, Any]]]:
    """The hand-written manifests in ``expected/<name>.yaml`` (one YAML document each)."""

    def load(name: str) -> list[dict[str, Any]]:
        text = (EXPECTED_DIR / f"{name}.yaml").read_text()
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]

    return load


def _differences(actual: Any, wanted: Any, path: str) -> list[str]:
    if isinstance(actual, dict) and isinstance(wanted, dict):
        found: list[str] = []
        for key in sorted(set(actual) | set(wanted), key=str):
            where = f"{path}.{key}"
            if key not in actual:
                found.append(f"missing {where}: {wanted[key]!r}")
            elif key not in wanted:
                found.append(f"unexpected {where}: {actual[key]!r}")
            else:
                found += _differences(actual[key], wanted[key], where)
        return found
    if isinstance(actual, list) and isinstance(wanted, list) and len(actual) == len(wanted):
        found = []
        for index, (got, want) in enumerate(zip(actual, wanted, strict=True)):
            found += _differences(got, want, f"{path}[{index}]")
        return found
    return [] if actual == wanted else [f"{path}: {actual!r} != {wanted!r}"]


@pytest.fixture
def assert_manifests() -> Callable[[Any, Any], None]:
    """``assert actual == wanted``, explaining a failure path by path."""

    def check(actual: Any, wanted: Any) -> None:
        assert actual == wanted, "\n".join(_differences(actual, wanted, "$"))

    return check
