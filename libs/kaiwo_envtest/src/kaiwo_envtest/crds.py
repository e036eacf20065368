"""The third-party CRDs (Kueue, KubeRay, AppWrapper, Gateway API) as their own modules ship them,
from the built stack (:attr:`~kaiwo_envtest.stack.BuiltStack.crds`).

Kueue serves two versions, ``v1beta1`` (what the operator writes, as upstream Kaiwo does) and
``v1beta2`` (stored), converted by a webhook of the Kueue manager. Where the Kueue manager runs,
:func:`with_conversion_webhook` points the API server at it. Where it does not, nothing could
convert: :func:`one_version` makes the CRD serve and store the one version the operator uses,
so that the API server stores what it was given, as a cluster with no Kueue running would need.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any, Final

import yaml

KUEUE_GROUP: Final = "kueue.x-k8s.io"


def load_crds(directory: Path) -> list[dict[str, Any]]:
    """Every CRD document of ``directory``'s YAML files, sorted by file name."""
    # libyaml's loader: the pure-Python one takes seconds over these 5 MB.
    return [
        document
        for path in sorted(directory.glob("*.yaml"))
        for document in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader)
        if document and document.get("kind") == "CustomResourceDefinition"
    ]


def one_version(crd: dict[str, Any], version: str) -> dict[str, Any]:
    """``crd`` serving and storing only ``version`` (which it must define), no conversion."""
    versions = [v for v in crd["spec"]["versions"] if v["name"] == version]
    if not versions:
        raise ValueError(f"{crd['metadata']['name']} has no version {version}")
    chosen = copy.deepcopy(crd)
    chosen["spec"]["versions"] = [{**versions[0], "served": True, "storage": True}]
    chosen["spec"].pop("conversion", None)
    return chosen


def with_conversion_webhook(crd: dict[str, Any], *, url: str, ca: bytes) -> dict[str, Any]:
    """``crd`` converting between its versions through the webhook at ``url`` (Kueue's
    ``/convert``), whose serving certificate ``ca`` (PEM) signed."""
    converted = copy.deepcopy(crd)
    converted["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"url": url, "caBundle": base64.b64encode(ca).decode()},
            "conversionReviewVersions": ["v1"],
        },
    }
    return converted


def is_kueue(crd: dict[str, Any]) -> bool:
    return bool(crd["spec"]["group"] == KUEUE_GROUP)


def third_party_crds(directory: Path, *, kueue_version: str) -> list[dict[str, Any]]:
    """The CRDs of ``directory`` (a built stack's ``crds``) for a control plane with no Kueue
    manager: Kueue's serve and store ``kueue_version`` only."""
    return [
        one_version(crd, kueue_version) if is_kueue(crd) else crd for crd in load_crds(directory)
    ]
