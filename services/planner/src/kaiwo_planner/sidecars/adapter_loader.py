"""Adapter loader: keeps the LoRA adapters of the vLLM server next to it as its Model wants.

Runs as a sidecar of each model-server Pod of a VLLM Model with ``adapters``, on the
model-loader image (``python3 loader.py``; standard library only). Every few seconds:

1. read the wanted adapters (``$KAIWO_ADAPTERS_FILE``: a JSON list of name, url and hash,
   from the Model's ConfigMap, which the kubelet updates in place);
2. read what this Pod reports loaded: its labels ``adapter.kubeai.org/<name>: <hash>``;
3. once the server answers ``/health``: for each wanted adapter not reported with its hash,
   download it (``load <url> <dir>``, the model-loader's command) into
   ``$KAIWO_ADAPTERS_DIR/<name>``, ask the server to load it (``/v1/load_lora_adapter``;
   "already loaded" counts as loaded) and label the Pod; for each reported adapter no longer
   wanted, ask the server to unload it (``/v1/unload_lora_adapter``; "not found" counts as
   unloaded), remove its files and its label. An adapter whose URL changed is unloaded
   first and loaded again.

The labels are the report: the operator reads them (status, ``AdaptersLoaded``) and so would
a load balancer routing ``<model>_<adapter>`` requests. They are written with a JSON merge
patch of this Pod under field manager ``kaiwo-adapter-loader``, with the service-account
token mounted for this container alone. A failure is logged and tried again next round;
nothing here ends the loop.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

LABEL_PREFIX = "adapter.kubeai.org/"
FIELD_MANAGER = "kaiwo-adapter-loader"
TOKEN_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HTTP_TIMEOUT = 10.0


def log(message: str) -> None:
    print(f"adapter-loader: {message}", file=sys.stderr, flush=True)  # noqa: T201


class RequestFailedError(Exception):
    """An HTTP request answered with an error status (``status``, ``body``) or not at all."""

    def __init__(self, message: str, *, status: int = 0, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def request(
    method: str,
    url: str,
    *,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> Any:
    """One JSON request; the decoded answer (None when empty)."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **(headers or {})}
    call = urllib.request.Request(url, data=data, method=method, headers=sent)  # noqa: S310
    try:
        with urllib.request.urlopen(call, timeout=HTTP_TIMEOUT, context=context) as answer:  # noqa: S310
            text = answer.read().decode() or "null"
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")
        raise RequestFailedError(
            f"{method} {url}: {error.code} {detail}", status=error.code, body=detail
        ) from error
    except (urllib.error.URLError, OSError) as error:
        raise RequestFailedError(f"{method} {url}: {error}") from error
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class Adapter:
    name: str
    url: str
    hash: str


class Server:
    """The local vLLM server's adapter API."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def healthy(self) -> bool:
        try:
            request("GET", f"{self.base_url}/health")
        except RequestFailedError:
            return False
        return True

    def load(self, name: str, path: str) -> None:
        try:
            request(
                "POST",
                f"{self.base_url}/v1/load_lora_adapter",
                body={"lora_name": name, "lora_path": path},
            )
        except RequestFailedError as error:
            if error.status == 400 and "already" in error.body.lower():
                return
            raise

    def unload(self, name: str) -> None:
        try:
            request("POST", f"{self.base_url}/v1/unload_lora_adapter", body={"lora_name": name})
        except RequestFailedError as error:
            if error.status in (400, 404) and "not found" in error.body.lower().replace(
                "cannot be found", "not found"
            ):
                return
            raise


class OwnPod:
    """This Pod's labels, through the Kubernetes API."""

    def __init__(
        self,
        *,
        api_url: str,
        namespace: str,
        name: str,
        token: Callable[[], str],
        context: ssl.SSLContext | None,
    ) -> None:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        self.url = api_url.rstrip("/") + path
        self.token = token
        self.context = context

    def _headers(self, content_type: str = "application/json") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token()}", "Content-Type": content_type}

    def reported(self) -> dict[str, str]:
        pod = request("GET", self.url, headers=self._headers(), context=self.context)
        labels = ((pod or {}).get("metadata") or {}).get("labels") or {}
        return {
            key[len(LABEL_PREFIX) :]: str(value)
            for key, value in labels.items()
            if key.startswith(LABEL_PREFIX)
        }

    def label(self, name: str, value: str | None) -> None:
        manager = urllib.parse.quote(FIELD_MANAGER)
        request(
            "PATCH",
            f"{self.url}?fieldManager={manager}",
            body={"metadata": {"labels": {f"{LABEL_PREFIX}{name}": value}}},
            headers=self._headers("application/merge-patch+json"),
            context=self.context,
        )


def download_with(command: list[str]) -> Callable[[str, Path], None]:
    """A downloader running ``command <url> <directory>`` (the model-loader's ``load``)."""

    def download(url: str, directory: Path) -> None:
        done = subprocess.run([*command, url, str(directory)], check=False)  # noqa: S603
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} {url} exited with {done.returncode}")

    return download


def wanted_adapters(path: Path) -> list[Adapter]:
    entries = json.loads(path.read_text())
    return [Adapter(name=e["name"], url=e["url"], hash=e["hash"]) for e in entries]


class AdapterLoader:
    """One round at a time (:meth:`sync`), each making the server hold what is wanted."""

    def __init__(
        self,
        *,
        wanted: Callable[[], list[Adapter]],
        server: Server,
        pod: OwnPod,
        download: Callable[[str, Path], None],
        directory: Path,
    ) -> None:
        self.wanted = wanted
        self.server = server
        self.pod = pod
        self.download = download
        self.directory = directory

    def sync(self) -> bool:
        """One round; whether the server now holds exactly the wanted adapters."""
        wanted = {adapter.name: adapter for adapter in self.wanted()}
        reported = self.pod.reported()
        if not self.server.healthy():
            log("the server is not healthy yet")
            return False
        outdated = [
            name
            for name, value in sorted(reported.items())
            if name not in wanted or wanted[name].hash != value
        ]
        missing = [a for name, a in sorted(wanted.items()) if reported.get(name) != a.hash]
        done = [self._attempt(f"unload {name}", partial(self._unload, name)) for name in outdated]
        done += [self._attempt(f"load {a.name}", partial(self._load, a)) for a in missing]
        return all(done)

    def _attempt(self, what: str, action: Callable[[], None]) -> bool:
        try:
            action()
        except (RequestFailedError, RuntimeError, OSError) as error:
            log(f"{what} failed, trying again next round: {error}")
            return False
        log(f"{what}: done")
        return True

    def _load(self, adapter: Adapter) -> None:
        target = self.directory / adapter.name
        if target.exists():
            shutil.rmtree(target)
        self.download(adapter.url, target)
        self.server.load(adapter.name, str(target))
        self.pod.label(adapter.name, adapter.hash)

    def _unload(self, name: str) -> None:
        self.server.unload(name)
        shutil.rmtree(self.directory / name, ignore_errors=True)
        self.pod.label(name, None)


def in_cluster_pod() -> OwnPod:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    context = ssl.create_default_context(cafile=str(TOKEN_DIR / "ca.crt"))
    return OwnPod(
        api_url=f"https://{host}:{port}",
        namespace=os.environ["POD_NAMESPACE"],
        name=os.environ["POD_NAME"],
        # Read each time: the kubelet rotates the projected token.
        token=lambda: (TOKEN_DIR / "token").read_text().strip(),
        context=context,
    )


def main() -> None:
    directory = Path(os.environ.get("KAIWO_ADAPTERS_DIR", "/adapters"))
    adapters_file = Path(os.environ["KAIWO_ADAPTERS_FILE"])
    interval = float(os.environ.get("KAIWO_ADAPTERS_INTERVAL_SECONDS", "5"))
    loader = AdapterLoader(
        wanted=lambda: wanted_adapters(adapters_file),
        server=Server(os.environ.get("KAIWO_SERVER_URL", "http://127.0.0.1:8000")),
        pod=in_cluster_pod(),
        download=download_with(os.environ.get("KAIWO_ADAPTER_DOWNLOAD", "load").split()),
        directory=directory,
    )
    while True:
        try:
            loader.sync()
        except (RequestFailedError, OSError, ValueError, KeyError) as error:
            log(f"round failed, trying again: {error}")
        time.sleep(interval)


if __name__ == "__main__":
    main()
