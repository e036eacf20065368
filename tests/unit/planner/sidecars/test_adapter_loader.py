"""The adapter-loader sidecar against a stand-in HTTP server playing both the vLLM server
next to it (health, load and unload of LoRA adapters) and the Kubernetes API (its own Pod)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kaiwo_planner.sidecars.adapter_loader import (
    Adapter,
    AdapterLoader,
    OwnPod,
    Server,
    download_with,
    wanted_adapters,
)

POD_PATH = "/api/v1/namespaces/ai/pods/model-llm-abc-0"


class StandIn:
    """What the stand-in holds: vLLM's loaded adapters, the Pod's labels, every request."""

    def __init__(self) -> None:
        self.healthy = True
        self.loaded: dict[str, str] = {}
        self.labels: dict[str, str] = {"model": "llm"}
        self.requests: list[tuple[str, str, Any]] = []
        self.fail_next_load = False
        self.tokens: list[str] = []


def handler_for(state: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length)) if length else None

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            state.requests.append(("GET", self.path, None))
            if self.path == "/health":
                self._answer(200 if state.healthy else 503, {})
            elif self.path == POD_PATH:
                state.tokens.append(self.headers.get("Authorization", ""))
                self._answer(200, {"metadata": {"labels": dict(state.labels)}})
            else:
                self._answer(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = self._body()
            state.requests.append(("POST", self.path, body))
            name = body["lora_name"]
            if self.path == "/v1/load_lora_adapter":
                if state.fail_next_load:
                    state.fail_next_load = False
                    self._answer(500, {"message": "out of memory"})
                elif name in state.loaded:
                    self._answer(
                        400,
                        {"type": "InvalidUserInput", "message": f"{name} has already been loaded"},
                    )
                else:
                    state.loaded[name] = body["lora_path"]
                    self._answer(200, "Success")
            elif self.path == "/v1/unload_lora_adapter":
                if state.loaded.pop(name, None) is None:
                    self._answer(
                        400,
                        {
                            "type": "NotFoundError",
                            "message": f"The lora adapter '{name}' cannot be found.",
                        },
                    )
                else:
                    self._answer(200, "Success")

        def do_PATCH(self) -> None:
            body = self._body()
            state.requests.append(("PATCH", self.path, body))
            assert self.headers["Content-Type"] == "application/merge-patch+json"
            assert self.path == f"{POD_PATH}?fieldManager=kaiwo-adapter-loader"
            for key, value in body["metadata"]["labels"].items():
                if value is None:
                    state.labels.pop(key, None)
                else:
                    state.labels[key] = value
            self._answer(200, {"metadata": {"labels": dict(state.labels)}})

    return Handler


@pytest.fixture
def stand_in() -> Iterator[tuple[StandIn, str]]:
    state = StandIn()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def loader_for(
    url: str, directory: Path, wanted: list[Adapter], downloads: list[str]
) -> AdapterLoader:
    def download(source: str, target: Path) -> None:
        downloads.append(source)
        target.mkdir(parents=True)
        (target / "adapter_config.json").write_text(json.dumps({"source": source}))

    return AdapterLoader(
        wanted=lambda: list(wanted),
        server=Server(url),
        pod=OwnPod(
            api_url=url, namespace="ai", name="model-llm-abc-0", token=lambda: "t0k", context=None
        ),
        download=download,
        directory=directory,
    )


SQL = Adapter(name="sql", url="hf://org/sql-lora", hash="h1")
CHAT = Adapter(name="chat", url="s3://bucket/chat", hash="h2")


def test_wanted_adapters_are_downloaded_loaded_and_reported_on_the_pod(
    stand_in: tuple[StandIn, str], tmp_path: Path
) -> None:
    state, url = stand_in
    downloads: list[str] = []
    loader = loader_for(url, tmp_path, [SQL, CHAT], downloads)

    assert loader.sync() is True

    assert state.loaded == {"chat": str(tmp_path / "chat"), "sql": str(tmp_path / "sql")}
    assert state.labels == {
        "model": "llm",
        "adapter.kubeai.org/chat": "h2",
        "adapter.kubeai.org/sql": "h1",
    }
    assert downloads == ["s3://bucket/chat", "hf://org/sql-lora"]
    assert set(state.tokens) == {"Bearer t0k"}

    # Nothing left to do: the next round only reads.
    state.requests.clear()
    assert loader.sync() is True
    assert [method for method, _, _ in state.requests] == ["GET", "GET"]


def test_an_adapter_no_longer_wanted_is_unloaded_its_files_and_label_removed(
    stand_in: tuple[StandIn, str], tmp_path: Path
) -> None:
    state, url = stand_in
    wanted = [SQL, CHAT]
    loader = loader_for(url, tmp_path, wanted, [])
    loader.sync()

    wanted.remove(CHAT)
    assert loader.sync() is True

    assert list(state.loaded) == ["sql"]
    assert "adapter.kubeai.org/chat" not in state.labels
    assert not (tmp_path / "chat").exists()


def test_a_changed_url_unloads_the_old_adapter_and_loads_the_new_one(
    stand_in: tuple[StandIn, str], tmp_path: Path
) -> None:
    state, url = stand_in
    wanted = [SQL]
    downloads: list[str] = []
    loader = loader_for(url, tmp_path, wanted, downloads)
    loader.sync()

    wanted[0] = Adapter(name="sql", url="hf://org/sql-lora-v2", hash="h9")
    assert loader.sync() is True

    assert state.labels["adapter.kubeai.org/sql"] == "h9"
    assert downloads == ["hf://org/sql-lora", "hf://org/sql-lora-v2"]
    posts = [(path, body["lora_name"]) for method, path, body in state.requests if method == "POST"]
    assert posts[-2:] == [("/v1/unload_lora_adapter", "sql"), ("/v1/load_lora_adapter", "sql")]


def test_nothing_is_loaded_before_the_server_is_healthy(
    stand_in: tuple[StandIn, str], tmp_path: Path
) -> None:
    state, url = stand_in
    state.healthy = False
    loader = loader_for(url, tmp_path, [SQL], [])

    assert loader.sync() is False
    assert state.loaded == {}
    state.healthy = True
    assert loader.sync() is True


def test_a_failed_load_is_not_reported_and_is_tried_again(
    stand_in: tuple[StandIn, str], tmp_path: Path
) -> None:
    state, url = stand_in
    state.fail_next_load = True
    loader = loader_for(url, tmp_path, [SQL, CHAT], [])

    assert loader.sync() is False
    assert state.labels == {"model": "llm", "adapter.kubeai.org/sql": "h1"}
    assert loader.sync() is True
    assert state.labels["adapter.kubeai.org/chat"] == "h2"


def test_already_loaded_and_already_gone_count_as_done(
    stand_in: tuple[StandIn, str], tmp_path: Path
) -> None:
    state, url = stand_in
    # The sidecar restarted: the server still has "sql", the Pod reports a gone "old".
    state.loaded["sql"] = str(tmp_path / "sql")
    state.labels["adapter.kubeai.org/old"] = "h0"
    loader = loader_for(url, tmp_path, [SQL], [])

    assert loader.sync() is True
    assert state.labels == {"model": "llm", "adapter.kubeai.org/sql": "h1"}


def test_the_wanted_list_is_the_configmaps_json_and_downloads_run_the_load_command(
    tmp_path: Path,
) -> None:
    listed = tmp_path / "adapters.json"
    listed.write_text(json.dumps([{"name": "sql", "url": "hf://o/r", "hash": "h1"}]))
    assert wanted_adapters(listed) == [Adapter(name="sql", url="hf://o/r", hash="h1")]

    script = "import sys, pathlib; pathlib.Path(sys.argv[2]).mkdir(); print(sys.argv[1])"
    download_with([sys.executable, "-c", script])("hf://o/r", tmp_path / "out")
    assert (tmp_path / "out").is_dir()
    with pytest.raises(RuntimeError, match="exited with 1"):
        download_with([sys.executable, "-c", "raise SystemExit(1)"])("hf://o/r", tmp_path / "x")


def test_the_script_the_plans_ship_is_this_module() -> None:
    from kaiwo_planner.domain.models.loader_script import ADAPTER_LOADER_SCRIPT
    from kaiwo_planner.sidecars import adapter_loader

    assert Path(adapter_loader.__file__).read_text() == ADAPTER_LOADER_SCRIPT
