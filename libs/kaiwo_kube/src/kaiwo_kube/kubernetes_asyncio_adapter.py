"""The Kubernetes port over kubernetes_asyncio's ApiClient (the only module that imports it).

Requests go through ``ApiClient.call_api`` with raw paths and JSON bodies, so every kind, built-in
or custom, is handled the same way and objects stay plain dicts. Whenever the credentials are
only certificates or a token (a pod's service account, most kubeconfigs), the ApiClient is
:class:`~kaiwo_kube.plain_client.PlainApiClient`, so neither a command nor a service imports
the client library (hundreds of modules, some 65 MB per process). Anything more in a
kubeconfig (exec plugins, auth providers, proxies) is left to the library's own ApiClient,
imported then. This adapter does
not retry: it raises :class:`~kaiwo_kube.errors.Retryable` and
the caller (the executor's backoff) decides.

The adapter is one part per protocol of the port: reads in :mod:`kaiwo_kube.adapter_reads`,
writes and the status and scale subresources in :mod:`kaiwo_kube.adapter_writes`; Events, CRDs
and the ways to connect here.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from kaiwo_kube.adapter_reads import ObjectReads
from kaiwo_kube.adapter_writes import ObjectWrites, Subresources
from kaiwo_kube.api_transport import ApiTransport
from kaiwo_kube.errors import AlreadyExists, KubeError
from kaiwo_kube.events import event_manifest
from kaiwo_kube.plain_client import (
    SERVICE_ACCOUNT,
    PlainApiClient,
    in_cluster_credentials,
    read_plain_credentials,
)
from kaiwo_kube.port import EventType
from kaiwo_kube.resources import (
    CUSTOM_RESOURCE_DEFINITION,
    EVENT,
)
from kaiwo_kube.responses import crd_established

if TYPE_CHECKING:
    from kubernetes_asyncio import client as k8s_client


class EventsAndCrds(ObjectReads, ObjectWrites):
    """:class:`~kaiwo_kube.port.EventRecorder` and :class:`~kaiwo_kube.port.CrdInstaller`
    (an Event seen twice in a second is counted; a CRD is applied, then read until served)."""

    async def create_event(
        self,
        *,
        involved: dict[str, Any],
        type: EventType,
        reason: str,
        message: str,
        component: str,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        event = event_manifest(
            involved=involved,
            event_type=type,
            reason=reason,
            message=message,
            component=component,
            now=now or datetime.now(UTC),
        )
        namespace = event["metadata"]["namespace"]
        try:
            return await self.transport.request("POST", EVENT.path(namespace=namespace), body=event)
        except AlreadyExists:
            # The same event in the same second: count it, as kubectl's recorder does.
            existing = await self.get(EVENT, event["metadata"]["name"], namespace=namespace)
            return await self.merge_patch(
                EVENT,
                event["metadata"]["name"],
                namespace=namespace,
                patch={
                    "count": int(existing.get("count") or 1) + 1,
                    "lastTimestamp": event["lastTimestamp"],
                },
            )

    async def apply_crd(self, crd: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
        self._kinds.forget()
        return await self.apply(
            crd, field_manager=field_manager, force=True, resource=CUSTOM_RESOURCE_DEFINITION
        )

    async def ensure_crds(
        self, crds: Iterable[dict[str, Any]], *, field_manager: str, within: float = 30.0
    ) -> None:
        # Applied together: the server spends most of a large CRD's time on its own
        # (compiling its schema), so one at a time is mostly waiting.
        applied = await asyncio.gather(
            *(self.apply_crd(crd, field_manager=field_manager) for crd in crds)
        )
        deadline = time.monotonic() + within
        for answer in applied:
            name, crd = answer["metadata"]["name"], answer
            while not crd_established(crd) or not await self._usable(crd):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CustomResourceDefinition {name} is not served")
                await asyncio.sleep(0.2)
                crd = await self.get(CUSTOM_RESOURCE_DEFINITION, name)

    async def _usable(self, crd: dict[str, Any]) -> bool:
        """Every served version is listed in discovery, and the stored one answers a list.
        Established comes first: a real API server adds the versions to discovery a moment
        later (until then a client that resolves kinds by discovery, this one or kubectl,
        cannot use them), and its storage may answer "initializing" for a moment too."""
        group = crd["spec"]["group"]
        plural = crd["spec"]["names"]["plural"]
        try:
            for version in crd["spec"].get("versions") or []:
                if not version.get("served", True):
                    continue
                listed = await self._kinds.listed(group, version["name"])
                if not any(entry.get("name") == plural for entry in listed):
                    return False
                if version.get("storage"):
                    # Only the stored version: another may need a conversion webhook.
                    path = f"/apis/{group}/{version['name']}/{plural}"
                    await self.transport.request("GET", path, query=[("limit", "1")])
        except KubeError:
            return False
        return True


class KubernetesAsyncioAdapter(EventsAndCrds, Subresources):
    """:class:`~kaiwo_kube.port.KubernetesPort` over a kubernetes_asyncio ApiClient: one part
    per protocol of the port, and how to connect."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient | PlainApiClient,
        *,
        request_timeout: float = 30.0,
        page_size: int = 500,
        user_agent: str | None = None,
    ) -> None:
        """``user_agent`` names the caller in the API server's audit log (e.g.
        ``kaiwo-executor/0.1.0``), so an operator's writes can be told from others'."""
        if user_agent:
            api_client.user_agent = user_agent
        super().__init__(
            ApiTransport(api_client, request_timeout=request_timeout), page_size=page_size
        )

    @classmethod
    async def from_kubeconfig(
        cls,
        path: str | Path | None = None,
        *,
        context: str | None = None,
        request_timeout: float = 30.0,
        page_size: int = 500,
        user_agent: str | None = None,
    ) -> Self:
        """From a kubeconfig file (default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
        from kubernetes_asyncio import config as k8s_config

        api = await k8s_config.new_client_from_config(
            config_file=str(path) if path is not None else os.environ.get("KUBECONFIG"),
            context=context,
            persist_config=False,
        )
        return cls(api, request_timeout=request_timeout, page_size=page_size, user_agent=user_agent)

    @classmethod
    async def in_cluster(cls, *, user_agent: str | None = None) -> Self:
        """From the pod's service account (its token re-read as the kubelet rotates it)."""
        credentials = in_cluster_credentials(os.environ)
        if credentials is None:
            raise RuntimeError(
                "not in a pod: KUBERNETES_SERVICE_HOST/PORT or the service account token "
                f"({SERVICE_ACCOUNT}) is missing"
            )
        return cls(PlainApiClient(credentials), user_agent=user_agent)

    @classmethod
    async def from_kubeconfig_quickly(
        cls,
        path: str | Path | None = None,
        *,
        context: str | None = None,
        user_agent: str | None = None,
    ) -> Self:
        """As :meth:`from_kubeconfig`, without loading the client library when the kubeconfig
        needs only certificates or a token: the library's every API class and model cost a
        command most of its start-up, and a service some 65 MB of memory for calls it never
        makes (the adapter sends raw paths either way)."""
        listed = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        where = Path(path) if path is not None else Path(listed) if listed else None
        where = (where or Path.home() / ".kube" / "config").expanduser()
        if path is not None and not where.is_file():
            # The client library would say "Expected key current-context in kube-config".
            # (A missing file listed in $KUBECONFIG is skipped, as kubectl skips it.)
            raise FileNotFoundError(f"no kubeconfig file at {where}")
        credentials = read_plain_credentials(where, context=context)
        if credentials is None:
            return await cls.from_kubeconfig(path, context=context, user_agent=user_agent)
        return cls(PlainApiClient(credentials), user_agent=user_agent)

    @classmethod
    async def from_environment(
        cls, kubeconfig: str | Path | None = None, *, user_agent: str | None = None
    ) -> Self:
        """In-cluster when running in a pod and no kubeconfig is named, else the kubeconfig;
        over the plain client whenever the credentials allow it."""
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return await cls.in_cluster(user_agent=user_agent)
        return await cls.from_kubeconfig_quickly(kubeconfig, user_agent=user_agent)

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
