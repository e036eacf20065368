"""LoRA adapters of a VLLM Model: loaded into running servers by a sidecar, no restart.

Upstream's controller execs into each Pod to download an adapter and calls vLLM's
``/v1/load_lora_adapter`` itself. The executor here only talks to the Kubernetes API, so
each VLLM Pod of a Model with ``adapters`` carries an *adapter loader* sidecar (a script of
ours, run with the model-loader image, which has the download tools) instead:

* the plan writes the wanted adapters to the ConfigMap ``model-<name>-adapters``
  (``adapters.json``: name, url and the url's hash, sorted by name), mounted as a directory
  into the sidecar, where the kubelet updates it in place: changing the list changes no
  Pod, so nothing restarts;
* the sidecar downloads each adapter to ``/adapters/<name>`` (an emptyDir the server reads),
  calls the local server's ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``, and
  reports what is loaded as upstream's Pod labels ``adapter.kubeai.org/<name>: <hash>`` on
  its own Pod;
* for that it may ``get`` and ``patch`` the Model's own Pods and nothing else: a Role of the
  Model names them, bound to the Pods' service account; the token is mounted into the
  sidecar only (the Pod's automatic token mount is off), not into the model server.

The sidecar's variables are upstream's (``spec.env`` sorted by name, then the credentials of
every object store a ``spec.env`` variable does not replace), then its own: ``POD_NAME``,
``POD_NAMESPACE``, ``KAIWO_ADAPTERS_FILE``, ``KAIWO_ADAPTERS_DIR`` and ``KAIWO_SERVER_URL``.
It needs those to work, so a ``spec.env`` variable of one of their names is left out of the
sidecar and still reaches the server (listing both, the API server's apply refused the
container, and the Model got no Pods; decision 0212). Nothing is told: upstream's sidecar has
no variable of those names and its download tools read none, so the user's variable only
ever meant something to the server, which has it.

A Model whose ``adapters`` is set (even empty) runs vLLM with ``--enable-lora`` and the
sidecar, as upstream; going from no ``adapters`` to some changes the Pods (a rollout).
The plan's Pod manifests never carry adapter labels: they are the sidecar's, under its own
field manager, and the operator's applies leave them alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kaiwo_contracts.crds.kubeai_v1.model import Adapter, Model
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.models.credentials import every_credential, sorted_env
from kaiwo_planner.domain.models.loader_script import ADAPTER_LOADER_SCRIPT
from kaiwo_planner.domain.models.names import (
    SERVER_PORT,
    adapter_loader_role,
    adapters_config_map,
)
from kaiwo_planner.domain.models.ownership import model_child_metadata
from kaiwo_planner.domain.models.setup import ModelSetup

LOADER_CONTAINER: Final = "loader"
ADAPTERS_VOLUME: Final = "adapters"
ADAPTERS_DIR: Final = "/adapters"
LOADER_CONFIG_VOLUME: Final = "adapter-loader"
LOADER_CONFIG_DIR: Final = "/kaiwo/adapter-loader"
LOADER_TOKEN_VOLUME: Final = "adapter-loader-token"  # noqa: S105 - a volume name
TOKEN_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"  # noqa: S105 - a path
ADAPTERS_KEY: Final = "adapters.json"
SCRIPT_KEY: Final = "loader.py"
DEFAULT_SERVICE_ACCOUNT: Final = "default"
TOKEN_SECONDS: Final = 3600

_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_FNV_OFFSET: Final = 0x811C9DC5
_FNV_PRIME: Final = 0x01000193


def string_hash(text: str) -> str:
    """Upstream's ``StringHash``: FNV-32a of ``text`` in decimal, each character mapped into
    a safe alphabet (the value of an ``adapter.kubeai.org/<name>`` label)."""
    value = _FNV_OFFSET
    for byte in text.encode():
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return "".join(_ALPHABET[ord(char) % len(_ALPHABET)] for char in str(value))


def uses_adapters(model: Model) -> bool:
    return model.spec.engine == "VLLM" and model.spec.adapters is not None


def wanted_adapters(adapters: Sequence[Adapter]) -> list[dict[str, str]]:
    return [
        {"name": adapter.name, "url": adapter.url, "hash": string_hash(adapter.url)}
        for adapter in sorted(adapters, key=lambda a: a.name)
    ]


def adapters_config_map_manifest(identity: ObjectRef, model: Model) -> dict[str, Any]:
    """The sidecar's input: the wanted adapters and the loader script."""
    wanted = wanted_adapters(model.spec.adapters or ())
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": model_child_metadata(identity, name=adapters_config_map(identity.name)),
        "data": {
            ADAPTERS_KEY: json.dumps(wanted, indent=1, sort_keys=True) + "\n",
            SCRIPT_KEY: ADAPTER_LOADER_SCRIPT,
        },
    }


def service_account(setup: ModelSetup) -> str:
    return setup.config.model_server_pods.service_account_name or DEFAULT_SERVICE_ACCOUNT


def loader_rbac(identity: ObjectRef, *, pods: Sequence[str], account: str) -> list[dict[str, Any]]:
    """The Role letting the sidecars label their own Pods, and its binding (none without
    Pods: a Role must name something)."""
    if not pods:
        return []
    name = adapter_loader_role(identity.name)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": model_child_metadata(identity, name=name),
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["get", "patch"],
                "resourceNames": sorted(pods),
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": model_child_metadata(identity, name=name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [
            {"kind": "ServiceAccount", "name": account, "namespace": identity.namespace or ""}
        ],
    }
    return [role, binding]


def loader_container(setup: ModelSetup) -> dict[str, Any]:
    """The adapter-loader sidecar (see the module docstring)."""
    spec = setup.model.spec
    user_env = spec.env or {}
    credentials = every_credential(
        secrets=setup.config.secret_names, namespace=setup.namespace, user_env=user_env
    )
    own = _loader_own_env()
    owned = {variable["name"] for variable in own}
    env = [
        *(variable for variable in sorted_env(user_env) if variable["name"] not in owned),
        *credentials.env,
        *own,
    ]
    container: dict[str, Any] = {
        "name": LOADER_CONTAINER,
        "image": setup.config.model_loading.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", f"{LOADER_CONFIG_DIR}/{SCRIPT_KEY}"],
        "env": env,
        "volumeMounts": [
            {"name": ADAPTERS_VOLUME, "mountPath": ADAPTERS_DIR},
            {"name": LOADER_CONFIG_VOLUME, "mountPath": LOADER_CONFIG_DIR, "readOnly": True},
            {"name": LOADER_TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True},
            *credentials.mounts,
        ],
    }
    if spec.env_from:
        container["envFrom"] = [source.to_wire() for source in spec.env_from]
    security = setup.config.model_server_pods.security_context
    if security:
        container["securityContext"] = dict(security)
    return container


def _loader_own_env() -> list[dict[str, Any]]:
    """The sidecar's own variables, which ``spec.env`` does not replace (module docstring)."""
    return [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "KAIWO_ADAPTERS_FILE", "value": f"{LOADER_CONFIG_DIR}/{ADAPTERS_KEY}"},
        {"name": "KAIWO_ADAPTERS_DIR", "value": ADAPTERS_DIR},
        {"name": "KAIWO_SERVER_URL", "value": f"http://127.0.0.1:{SERVER_PORT}"},
    ]


def adapter_volumes(identity: ObjectRef, setup: ModelSetup) -> list[Mapping[str, Any]]:
    credentials = every_credential(
        secrets=setup.config.secret_names,
        namespace=setup.namespace,
        user_env=setup.model.spec.env or {},
    )
    return [
        {"name": ADAPTERS_VOLUME, "emptyDir": {}},
        {"name": LOADER_CONFIG_VOLUME, "configMap": {"name": adapters_config_map(identity.name)}},
        {
            "name": LOADER_TOKEN_VOLUME,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "path": "token",
                            "expirationSeconds": TOKEN_SECONDS,
                        }
                    },
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                ]
            },
        },
        *credentials.volumes,
    ]


def server_adapter_mount() -> dict[str, Any]:
    return {"name": ADAPTERS_VOLUME, "mountPath": ADAPTERS_DIR, "readOnly": True}


def loaded_everywhere(reported: Sequence[Mapping[str, str]], adapters: Sequence[Adapter]) -> int:
    """How many of the Pods' reports (adapter name -> url hash) show every wanted adapter
    loaded and no other."""
    wanted = {adapter.name: string_hash(adapter.url) for adapter in adapters}
    return sum(dict(report) == wanted for report in reported)
