"""``kaiwo demo``: the whole operator against a sandbox cluster, with a scenario to watch.

Starts what ``kaiwo up --fake`` starts plus the sandbox's simulated controllers (Kueue, the
scheduler and kubelet, volume binding, GPU metrics and so the monitor), applies the scenario
(``kaiwo_cli/scenarios/demo.yaml`` by default) and shows a live table of the workloads until
Ctrl-C. Nothing runs: it is a simulation, and says so.

``--cluster kwok`` runs the real stack the project builds instead of the simulated Kueue,
scheduler and kubelet: kube-apiserver, controller manager, the kube-scheduler with the
kaiwo-scheduler's profile, Kueue, KubeRay, and kwok as the nodes' kubelet. The sandbox then
only registers the nodes, binds volumes and serves GPU metrics and container logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from kaiwo_kube import KubeError, known_type, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.logging import configure_logging
from kaiwo_sandbox import SandboxOptions, parse_fleet
from kaiwo_sandbox.fleet import DEFAULT_FLEET_TEXT
from kaiwo_sandbox.lifecycle import Timing
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from kaiwo_cli.cluster_port import ClusterReader, ClusterWriter
from kaiwo_cli.commands.up import console_line
from kaiwo_cli.manifest_files import read_documents
from kaiwo_cli.stack.local import (
    DEFAULT_CONSOLE_PORT,
    LocalStack,
)
from kaiwo_cli.stack.options import StackError, StackOptions
from kaiwo_cli.stack.start_up import start_unless_stopped
from kaiwo_cli.stack.state import DEFAULT_STATE_DIR
from kaiwo_cli.workload_table import (
    JOB_NAME_LABEL,
    PhaseHistory,
    WorkloadRow,
    render,
    workload_rows,
)

DEFAULT_SCENARIO: Final = Path(__file__).resolve().parents[1] / "scenarios" / "demo.yaml"
FIELD_MANAGER: Final = "kaiwo-demo"
SIMULATION_NOTE: Final = (
    "SIMULATION: a local API server with simulated nodes, Kueue, scheduler, kubelet and GPU "
    "metrics; nothing really runs."
)
KWOK_NOTE: Final = (
    "SIMULATION of the nodes only: the real Kubernetes control plane, kube-scheduler, Kueue and "
    "KubeRay, with kwok playing the nodes' kubelets and simulated GPU metrics; no container runs."
)
CLUSTERS: Final = ("fake", "envtest", "kwok")


def demo(
    *,
    scenario: Annotated[
        Path, typer.Option(help="Manifests to apply once the stack is up.")
    ] = DEFAULT_SCENARIO,
    fleet: Annotated[
        str, typer.Option(help="Sandbox nodes as TYPE=COUNT,... (amd-mi300x, nvidia-h100, cpu…).")
    ] = DEFAULT_FLEET_TEXT,
    time_scale: Annotated[
        float, typer.Option(help="Multiply every simulated delay (0.5: twice as fast).")
    ] = 1.0,
    cluster: Annotated[
        str,
        typer.Option(
            help="fake: the fake API server; envtest: a real kube-apiserver and "
            "controller-manager from the stack `make stack` builds (kubectl works fully); "
            "kwok: those with the real kube-scheduler, Kueue, KubeRay and kwok's nodes.",
        ),
    ] = "fake",
    envtest_assets: Annotated[
        Path | None,
        typer.Option(
            help="With --cluster envtest or kwok: a directory of the binaries (or their .xz "
            "archives); default $KAIWO_ENVTEST_ASSETS, else the built stack."
        ),
    ] = None,
    state_dir: Annotated[
        Path, typer.Option(help="NATS data, the SQLite event store and service logs.")
    ] = DEFAULT_STATE_DIR,
    exit_when_settled: Annotated[
        bool,
        typer.Option(
            "--exit-when-settled",
            help="Stop once every workload is final or serving (for scripts and tests).",
        ),
    ] = False,
    within: Annotated[
        float, typer.Option(help="With --exit-when-settled: give up after this many seconds.")
    ] = 120.0,
    console_port: Annotated[
        int,
        typer.Option(
            help="Port of the web console on 127.0.0.1 (anonymous, loopback only); 0: none. "
            "If taken, a free one."
        ),
    ] = DEFAULT_CONSOLE_PORT,
) -> None:
    """Run the operator on a simulated cluster and watch a scenario play out."""
    try:
        nodes = parse_fleet(fleet)
    except ValueError as error:
        typer.echo(f"kaiwo demo: --fleet: {error}", err=True)
        raise typer.Exit(2) from None
    if time_scale <= 0:
        typer.echo("kaiwo demo: --time-scale must be positive", err=True)
        raise typer.Exit(2)
    if cluster not in CLUSTERS:
        typer.echo(
            f"kaiwo demo: --cluster: {cluster!r} is not one of {', '.join(CLUSTERS)}", err=True
        )
        raise typer.Exit(2)
    if not scenario.exists():
        typer.echo(f"kaiwo demo: --scenario: {scenario} does not exist", err=True)
        raise typer.Exit(2)
    options = StackOptions(
        state_dir=state_dir,
        fake_cluster=True,
        console_port=console_port or None,
        local_cluster="kwok"
        if cluster == "kwok"
        else "envtest"
        if cluster == "envtest"
        else "fake",
        envtest_assets=envtest_assets,
        sandbox=SandboxOptions(
            fleet=nodes,
            timing=Timing(scale=time_scale),
            # A real controller manager makes the pods and writes Job and Deployment status.
            play_controllers=cluster == "fake",
            kwok=cluster == "kwok",
        ),
    )
    console = Console()
    # The live table is the output; the stack's own progress lines would tear it.
    configure_logging(level="WARNING")
    try:
        settled = asyncio.run(
            _run(
                options,
                scenario=scenario,
                console=console,
                exit_when_settled=exit_when_settled,
                within=within,
            )
        )
    except StackError as error:
        typer.echo(f"kaiwo demo: {error}", err=True)
        raise typer.Exit(2) from None
    if not settled:
        raise typer.Exit(1)


async def _run(
    options: StackOptions,
    *,
    scenario: Path,
    console: Console,
    exit_when_settled: bool,
    within: float,
) -> bool:
    started = time.monotonic()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    kwok = options.local_cluster == "kwok"
    console.print(f"[bold yellow]{KWOK_NOTE if kwok else SIMULATION_NOTE}[/]")
    stack = LocalStack(options)
    with console.status("starting the sandbox cluster, NATS, the event store and the services…"):
        if not await start_unless_stopped(stack, stop):
            console.print("kaiwo demo: stopped during start-up; everything it started is stopped")
            return False
    if stack.cluster_note is not None:
        console.print(f"kaiwo demo: {stack.cluster_note}", highlight=False, markup=False)
    for name, reason in stack.not_ready.items():
        console.print(
            f"kaiwo demo: {name}: {reason}; the rest runs without it", highlight=False, markup=False
        )
    try:
        assert stack.kubeconfig is not None
        kube = await KubernetesAsyncioAdapter.from_environment(
            stack.kubeconfig, user_agent="kaiwo-demo"
        )
        async with kube:
            for line in await apply_scenario(kube, scenario):
                # The API server's own words: "[spec.a: ..., spec.b: ...]" is no markup.
                console.print(line, highlight=False, markup=False)
            console.print(
                f"stack up and scenario applied in {time.monotonic() - started:.1f} s",
                style="dim",
            )
            if stack.console_note is not None:
                console.print(f"kaiwo demo: console: {stack.console_note}", highlight=False)
            if stack.options.console_url is not None:
                console.print(console_line(stack.options), highlight=False)
            return await _watch(
                kube,
                stack,
                console=console,
                stop=stop,
                exit_when_settled=exit_when_settled,
                within=within,
                started=started,
            )
    finally:
        with console.status("stopping…"):
            await stack.stop()


async def apply_scenario(kube: ClusterWriter, scenario: Path) -> list[str]:
    """Apply every document (server-side, as ``kaiwo-demo``); one line per document."""
    lines = []
    for document in read_documents(scenario):
        content = document.content
        if not isinstance(content, dict):
            continue
        resource = known_type(str(content.get("apiVersion", "")), str(content.get("kind", "")))
        if resource is None:
            lines.append(f"skipped {document.label}: kind {content.get('kind')} is not served")
            continue
        try:
            await kube.apply(content, field_manager=FIELD_MANAGER, resource=resource)
        except KubeError as error:
            lines.append(f"error {document.label}: {' '.join(error.message.split())}")
            continue
        lines.append(f"applied {content['kind']} {_name(content)}")
    return lines


def _name(content: dict[str, Any]) -> str:
    metadata = content.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


async def current_rows(kube: ClusterReader, *, now: datetime) -> list[WorkloadRow]:
    workloads = []
    for kind in (resources.KAIWO_JOB, resources.KAIWO_SERVICE):
        for obj in (await kube.list(kind)).items:
            obj.setdefault("kind", kind.kind)
            workloads.append(obj)
    return workload_rows(
        workloads=workloads,
        kueue_workloads=(await kube.list(resources.KUEUE_WORKLOAD)).items,
        jobs=(await kube.list(resources.JOB)).items,
        pods=(await kube.list(resources.POD, label_selector=JOB_NAME_LABEL)).items,
        now=now,
    )


def next_steps(
    *,
    history: PhaseHistory,
    kubeconfig: Path | None,
    state_dir: Path,
    kaiwo: str,
    console_url: str | None = None,
) -> Text:
    """What happened, and the commands to try in another shell, with the scenario's own
    workloads: the one that failed, the one that waited (the end-to-end test runs them as
    printed)."""
    story = "".join(f"  {line}\n" for line in history.story())
    failed = history.first_in("FAILED") or history.first_in("COMPLETE") or "ml-team/NAME"
    waited = history.longest_wait() or failed
    where = (
        "in another shell in this directory"
        if state_dir == DEFAULT_STATE_DIR
        else f"in another shell, after export KAIWO_STATE={state_dir.resolve()}"
    )
    # Short enough for an 80-column terminal: a comment only where it explains the name.
    commands = [
        (f"{kaiwo} submit -f examples/kaiwojob-gpu-training.yaml --wait", ""),
        (f"{kaiwo} list", ""),
        (f"{kaiwo} status {waited}", "why it waited"),
        (f"{kaiwo} logs {failed}", "its last words"),
        (f"{kaiwo} queues", ""),
        (f"{kaiwo} events explain {failed}", ""),
        (f"{kaiwo} events tail", ""),
    ]
    width = max(len(command) for command, why in commands if why)
    lines = "".join(
        f"  {command:<{width}}  # {why}\n" if why else f"  {command}\n" for command, why in commands
    )
    return Text.from_markup(
        "\n[bold]The scenario has played out.[/] What happened:\n"
        f"{escape(story)}"
        f"Try, {escape(where)}:\n"
        f"{escape(lines)}"
        "With kubectl:\n"
        f"  export KUBECONFIG={kubeconfig.resolve() if kubeconfig else ''}\n"
        "  kubectl get kaiwojobs,kaiwoservices -A      # the printer columns\n"
        "  kubectl get workloads.kueue.x-k8s.io -A     # Kueue's admissions\n"
        f"  kubectl logs -n {failed.partition('/')[0]} -l kaiwo.silogen.ai/name="
        f"{failed.partition('/')[2]}\n"
        + (
            f"In a browser: {escape(console_url)} (workloads, queues with ETA, GPU nodes, "
            "Models; live)\n"
            if console_url
            else ""
        )
        + "Ctrl-C stops everything.",
    )


def kaiwo_executable(cwd: Path) -> str:
    """How to type ``kaiwo`` here: the command beside this Python (``.venv/bin/kaiwo`` in a
    checkout), relative to ``cwd`` when under it."""
    beside = Path(sys.executable).parent / "kaiwo"
    with contextlib.suppress(ValueError):
        return str(beside.relative_to(cwd))
    in_checkout = cwd / ".venv" / "bin" / "kaiwo"
    with contextlib.suppress(OSError):
        if in_checkout.samefile(beside):  # the checkout's .venv, linked elsewhere
            return str(in_checkout.relative_to(cwd))
    return str(beside)


async def _watch(
    kube: ClusterReader,
    stack: LocalStack,
    *,
    console: Console,
    stop: asyncio.Event,
    exit_when_settled: bool,
    within: float,
    started: float,
) -> bool:
    history = PhaseHistory()
    title = (
        "kaiwo demo — real Kueue and scheduler, SIMULATED nodes (Ctrl-C stops)"
        if stack.options.local_cluster == "kwok"
        else "kaiwo demo — SIMULATED cluster (Ctrl-C stops)"
    )
    settled_at: float | None = None
    first_table: float | None = None
    with Live(console=console, refresh_per_second=4, transient=False) as live:
        while not stop.is_set():
            rows = await current_rows(kube, now=datetime.now(UTC))
            history.record(rows)
            if first_table is None and rows:
                first_table = time.monotonic() - started
            table = render(rows, history, title=title)
            settled = bool(rows) and all(row.settled for row in rows)
            if settled and settled_at is None:
                settled_at = time.monotonic() - started
            if settled_at is not None:
                live.update(
                    Group(
                        table,
                        Text(
                            f"live table after {first_table or 0:.1f} s; "
                            f"scenario played out after {settled_at:.1f} s",
                            style="dim",
                        ),
                        next_steps(
                            history=history,
                            kubeconfig=stack.kubeconfig,
                            state_dir=stack.options.state_dir,
                            kaiwo=kaiwo_executable(Path.cwd()),
                            console_url=stack.options.console_url,
                        ),
                    )
                )
                if exit_when_settled:
                    return True
            else:
                live.update(table)
                if exit_when_settled and time.monotonic() - started > within:
                    console.print(f"[red]the scenario did not play out within {within:.0f} s[/]")
                    return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
    return settled_at is not None
