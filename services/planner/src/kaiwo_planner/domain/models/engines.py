"""What each engine runs in the server container: command, arguments, variables, probes.

As upstream (reference §4.3), with two changes a user would expect:

* FasterWhisper and Infinity read a ``pvc://`` model from ``/model``, where it is mounted
  (upstream passes them the claim's name, which they cannot load);
* OLlama's startup probe runs its script as one ``bash -c`` argument (upstream passes the
  words as separate arguments, so bash runs only the first, issue #721).

The model location ``<M>``: the cache directory with a cache profile; ``/model`` for a
``pvc://`` URL; for VLLM the whole ``s3://`` URL (streamed, ``--load-format=runai_streamer``);
else the reference (``org/repo``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from kaiwo_planner.domain.models.credentials import PVC_MOUNT
from kaiwo_planner.domain.models.names import SERVER_PORT, cache_directory
from kaiwo_planner.domain.models.setup import ModelSetup

VLLM_COMMAND: Final = ("python3", "-m", "vllm.entrypoints.openai.api_server")
LORA_ENV: Final = MappingProxyType({"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"})


@dataclass(frozen=True, slots=True)
class EngineContainer:
    """The engine's part of the server container."""

    args: tuple[str, ...]
    env: tuple[Mapping[str, Any], ...]
    startup_probe: Mapping[str, Any]
    readiness_probe: Mapping[str, Any]
    liveness_probe: Mapping[str, Any]
    command: tuple[str, ...] | None = None


def engine_container(setup: ModelSetup) -> EngineContainer:
    """The engine's command, arguments, variables and probes (configured probes win)."""
    built = {
        "VLLM": _vllm,
        "OLlama": _ollama,
        "FasterWhisper": _faster_whisper,
        "Infinity": _infinity,
    }[setup.engine](setup)
    probes = setup.config.model_servers.for_engine(setup.engine).probes
    if probes is None:
        return built
    return EngineContainer(
        args=built.args,
        env=built.env,
        command=built.command,
        startup_probe=probes.startup or built.startup_probe,
        readiness_probe=probes.readiness or built.readiness_probe,
        liveness_probe=probes.liveness or built.liveness_probe,
    )


def cache_mount_path(setup: ModelSetup) -> str:
    return "/" + cache_directory(setup.name, setup.uid)


def model_location(setup: ModelSetup) -> str:
    """``<M>`` (see the module docstring)."""
    source = setup.source
    if setup.cache is not None:
        return cache_mount_path(setup)
    if source.scheme == "pvc":
        return PVC_MOUNT
    if source.scheme == "s3" and setup.engine == "VLLM":
        return source.original
    return source.ref


def _http_probe(
    path: str, *, period: int, timeout: int, failures: int, delay: int = 0
) -> dict[str, Any]:
    probe: dict[str, Any] = {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
        "successThreshold": 1,
    }
    if delay:
        probe["initialDelaySeconds"] = delay
    return probe


def _with_health_probes(
    *,
    args: tuple[str, ...],
    env: tuple[Mapping[str, Any], ...],
    startup_failures: int,
    command: tuple[str, ...] | None = None,
) -> EngineContainer:
    """A server answering ``/health``: vLLM, FasterWhisper, Infinity."""
    return EngineContainer(
        args=args,
        env=env,
        command=command,
        startup_probe=_http_probe("/health", period=2, timeout=2, failures=startup_failures),
        readiness_probe=_http_probe("/health", period=10, timeout=2, failures=3),
        liveness_probe=_http_probe("/health", period=30, timeout=3, failures=3),
    )


def _vllm(setup: ModelSetup) -> EngineContainer:
    spec = setup.model.spec
    streamed = setup.cache is None and setup.source.scheme == "s3"
    args = [f"--model={model_location(setup)}", f"--served-model-name={setup.name}"]
    if streamed:
        args.append("--load-format=runai_streamer")
    args += spec.args or ()
    env: list[Mapping[str, Any]] = []
    if spec.adapters is not None:
        args.append("--enable-lora")
        env.append(dict(LORA_ENV))
    # Large models take long to load: up to 3 hours (2 s x 5400).
    return _with_health_probes(
        command=VLLM_COMMAND, args=tuple(args), env=tuple(env), startup_failures=5400
    )


def ollama_startup_script(setup: ModelSetup) -> str:
    """Pull (unless ``pull=false``) and rename the model to the Model's name, so requests
    can address it by that name; load a text-generation model into memory before the Pod
    turns Ready (embedding models cannot ``run``)."""
    source, name = setup.source, setup.name
    if source.scheme == "pvc":
        steps = [f"/bin/ollama cp {source.model_param} {name}"]
    elif source.pull:
        insecure = " --insecure" if source.insecure else ""
        steps = [f"/bin/ollama pull{insecure} {source.ref}", f"/bin/ollama cp {source.ref} {name}"]
    else:
        steps = [f"/bin/ollama cp {source.ref} {name}"]
    if "TextGeneration" in (setup.model.spec.features or ()):
        steps.append(f"/bin/ollama run {name} hi")
    return " && ".join(steps)


def _ollama(setup: ModelSetup) -> EngineContainer:
    env: list[Mapping[str, Any]] = [
        {"name": "OLLAMA_HOST", "value": f"0.0.0.0:{SERVER_PORT}"},
        # One model per server, kept in memory (0 would mean "unload at once").
        {"name": "OLLAMA_KEEP_ALIVE", "value": "999999h"},
    ]
    if setup.source.scheme == "pvc":
        env.append({"name": "OLLAMA_MODELS", "value": PVC_MOUNT})
    return EngineContainer(
        args=tuple(setup.model.spec.args or ()),
        env=tuple(env),
        # The pull runs in the probe (the server must be up to pull): up to 3 hours.
        startup_probe={
            "exec": {"command": ["/bin/bash", "-c", ollama_startup_script(setup)]},
            "initialDelaySeconds": 1,
            "periodSeconds": 3,
            "failureThreshold": 10,
            "timeoutSeconds": 60 * 180,
        },
        readiness_probe=_http_probe("/", period=10, timeout=2, failures=3),
        liveness_probe=_http_probe("/", period=30, timeout=3, failures=3, delay=900),
    )


def _faster_whisper(setup: ModelSetup) -> EngineContainer:
    return _with_health_probes(
        args=tuple(setup.model.spec.args or ()),
        env=(
            {"name": "WHISPER__MODEL", "value": model_location(setup)},
            {"name": "ENABLE_UI", "value": "false"},
        ),
        startup_failures=900,
    )


def _infinity(setup: ModelSetup) -> EngineContainer:
    return _with_health_probes(
        args=("v2", *(setup.model.spec.args or ())),
        env=(
            {"name": "INFINITY_MODEL_ID", "value": model_location(setup)},
            {"name": "INFINITY_SERVED_MODEL_NAME", "value": setup.name},
            {"name": "INFINITY_URL_PREFIX", "value": "/v1"},
            {"name": "INFINITY_ENGINE", "value": "torch"},
            {"name": "INFINITY_PORT", "value": str(SERVER_PORT)},
        ),
        startup_failures=600,
    )
