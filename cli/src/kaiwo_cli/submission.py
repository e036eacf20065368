"""``kaiwo submit``: who submits to which queue, and the manifest as it will be sent.

The scientist's configuration is a small YAML file with ``user`` and ``clusterQueue``:
``$KAIWOCONFIG`` when set, else ``~/.config/kaiwo/kaiwoconfig.yaml``, the API reference's and
upstream's name (``config.yaml`` beside it is still read when it alone exists: earlier releases
named it so); absent, nothing is configured.
``--user``/``--queue`` win over it. Either fills ``spec.user`` and ``spec.clusterQueue`` only
where the manifest leaves them out: what a manifest says is never overwritten.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

CONFIG_ENV: Final = "KAIWOCONFIG"
DEFAULT_CONFIG: Final = Path("~/.config/kaiwo/kaiwoconfig.yaml")
EARLIER_DEFAULT_CONFIG: Final = Path("~/.config/kaiwo/config.yaml")
"""The default until decision 0217, read when the default does not exist and it does."""
SUBMITTABLE: Final = {
    ("kaiwo.silogen.ai/v1alpha1", "KaiwoJob"),
    ("kaiwo.silogen.ai/v1alpha1", "KaiwoService"),
}


class SubmissionError(ValueError):
    """The input cannot be submitted; the message names the field and why."""


@dataclass(frozen=True, slots=True)
class ScientistConfig:
    user: str | None = None
    cluster_queue: str | None = None


def config_path(environ: Mapping[str, str]) -> Path:
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV])
    default, earlier = DEFAULT_CONFIG.expanduser(), EARLIER_DEFAULT_CONFIG.expanduser()
    return earlier if not default.exists() and earlier.exists() else default


def read_config(path: Path, *, given: bool = False) -> ScientistConfig:
    """The configuration at ``path``; an absent file configures nothing, unless the user
    ``given`` it (``--config``): then it is a mistake to say."""
    import yaml

    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        if given:
            raise SubmissionError(f"{path}: no such file (--config)") from None
        return ScientistConfig()
    except (OSError, yaml.YAMLError) as error:
        raise SubmissionError(f"{path}: cannot be read: {error}") from error
    if document is None:
        return ScientistConfig()
    if not isinstance(document, dict):
        raise SubmissionError(f"{path}: must be a mapping with user and clusterQueue")
    for key in ("user", "clusterQueue"):
        if key in document and not isinstance(document[key], str):
            raise SubmissionError(f"{path}: {key}: must be a string")
    return ScientistConfig(user=document.get("user"), cluster_queue=document.get("clusterQueue"))


def effective_config(
    config: ScientistConfig, *, user: str | None, queue: str | None
) -> ScientistConfig:
    """Flags over the file."""
    return ScientistConfig(user=user or config.user, cluster_queue=queue or config.cluster_queue)


def prepare_manifest(
    document: Any, *, config: ScientistConfig, namespace: str | None
) -> dict[str, Any]:
    """The manifest to send: a KaiwoJob or KaiwoService with its namespace, and the user and
    queue filled in where it has none. Raises :class:`SubmissionError` naming the field."""
    if not isinstance(document, dict):
        raise SubmissionError("the manifest must be a mapping of fields")
    key = (document.get("apiVersion"), document.get("kind"))
    if key not in SUBMITTABLE:
        raise SubmissionError(
            f"kind: kaiwo submit takes a KaiwoJob or KaiwoService "
            f"(kaiwo.silogen.ai/v1alpha1), not {key[1]} of {key[0]}; use kaiwo apply for others"
        )
    manifest = copy.deepcopy(document)
    metadata = manifest.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        raise SubmissionError("metadata: must be a mapping")
    given = metadata.get("namespace")
    if given and namespace and given != namespace:
        raise SubmissionError(
            f"metadata.namespace: the manifest says {given}, --namespace says {namespace}"
        )
    metadata["namespace"] = given or namespace or "default"
    spec = manifest.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise SubmissionError("spec: must be a mapping")
    if not spec.get("user") and config.user:
        spec["user"] = config.user
    if not spec.get("clusterQueue") and config.cluster_queue:
        spec["clusterQueue"] = config.cluster_queue
    return manifest


def workload_name(manifest: Mapping[str, Any]) -> str:
    """``KaiwoJob ml-team/train``: how the messages of ``submit`` name a prepared manifest."""
    metadata = manifest.get("metadata") or {}
    return f"{manifest.get('kind')} {metadata.get('namespace')}/{metadata.get('name')}"


def repeated_names(manifests: list[dict[str, Any]]) -> list[str]:
    """Problems of documents that name a workload an earlier document of the file names too:
    the second create would be refused after the first was made (``doc#N`` counts from 1)."""
    first: dict[tuple[str, str, str], int] = {}
    problems = []
    for number, manifest in enumerate(manifests, start=1):
        metadata = manifest.get("metadata") or {}
        key = (
            str(manifest.get("kind")),
            str(metadata.get("namespace")),
            str(metadata.get("name")),
        )
        if key in first:
            problems.append(
                f"doc#{number} {workload_name(manifest)}: doc#{first[key]} names it too"
            )
        else:
            first[key] = number
    return problems
