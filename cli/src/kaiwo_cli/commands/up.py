"""``kaiwo up``: run the operator on this machine (NATS, event store, every service)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Annotated

import typer
from kaiwo_contracts.events.messenger import NotATenantError, tenant_key_name
from kaiwo_contracts.events.permissions import SUBSCRIBER, namespace_subscriber_name
from kaiwo_runtime.nats_credentials import ServerTls
from kaiwo_runtime.redaction import redact_url
from rich.console import Console
from rich.table import Table

from kaiwo_cli.stack.local import (
    DEFAULT_CONSOLE_PORT,
    TOGETHER,
    LocalStack,
)
from kaiwo_cli.stack.options import StackError, StackOptions
from kaiwo_cli.stack.scheduler import SCHEDULER_MODES, SchedulerMode
from kaiwo_cli.stack.start_up import start_unless_stopped
from kaiwo_cli.stack.state import DEFAULT_STATE_DIR

console = Console(stderr=True)


def up(
    *,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(help="Cluster to operate; default $KUBECONFIG, then ~/.kube/config."),
    ] = None,
    install_crds: Annotated[
        bool, typer.Option("--install-crds", help="Install or update the operator's CRDs.")
    ] = False,
    scheduler: Annotated[
        str,
        typer.Option(
            help="install: deploy the kaiwo-scheduler into kaiwo-system and name it in the "
            "KaiwoConfig; external: the cluster's own (KaiwoConfig names default-scheduler); "
            "existing: leave both as the cluster has them.",
        ),
    ] = "install",
    fake: Annotated[
        bool,
        typer.Option("--fake", help="Operate a fake API server started here (no cluster needed)."),
    ] = False,
    state_dir: Annotated[
        Path,
        typer.Option(
            "--state-dir",
            "--state",
            envvar="KAIWO_STATE",
            help="NATS data, the SQLite event store, service logs and stack.json.",
        ),
    ] = DEFAULT_STATE_DIR,
    nats_port: Annotated[
        int | None, typer.Option(help="NATS client port; default: a free one.")
    ] = None,
    nats_cpus: Annotated[
        int,
        typer.Option(min=0, help="Cores nats-server uses at once (GOMAXPROCS); 0: one per core."),
    ] = 1,
    store: Annotated[
        str | None,
        typer.Option(help="Event store URL; default sqlite:///<state-dir>/events.db."),
    ] = None,
    metrics_endpoint: Annotated[
        str | None,
        typer.Option(
            help="Prometheus URL, or an exporter's /metrics page; starts the monitor when given.",
            # The API reference's name too; the project's own decides where both are set.
            envvar=["KAIWO_MONITOR_METRICS_ENDPOINT", "RESOURCE_MONITORING_METRICS_ENDPOINT"],
        ),
    ] = None,
    gateway_port: Annotated[
        int,
        typer.Option(help="Port of the OpenAI gateway on 127.0.0.1 (/openai/v1); 0: none."),
    ] = 8000,
    gateway_anonymous: Annotated[
        bool,
        typer.Option(
            "--gateway-anonymous/--gateway-tokens",
            help="Serve every caller on this machine without a token (loopback only), or "
            "require Kubernetes bearer tokens, checked with the cluster's TokenReview and "
            "SubjectAccessReview, as in a cluster.",
        ),
    ] = True,
    console_port: Annotated[
        int,
        typer.Option(
            help="Port of the web console on 127.0.0.1; 0: none. If taken, a free one "
            "(the banner says which)."
        ),
    ] = DEFAULT_CONSOLE_PORT,
    console_anonymous: Annotated[
        bool,
        typer.Option(
            "--console-anonymous/--console-tokens",
            help="Show every namespace to anyone on this machine without a token (loopback "
            "only), or require Kubernetes tokens, checked with TokenReview and "
            "SubjectAccessReview, as in a cluster.",
        ),
    ] = True,
    nats_tls_cert: Annotated[
        Path | None, typer.Option(help="Serve NATS over TLS with this certificate (PEM).")
    ] = None,
    nats_tls_key: Annotated[
        Path | None, typer.Option(help="The private key of --nats-tls-cert (PEM).")
    ] = None,
    nats_tls_ca: Annotated[
        Path | None,
        typer.Option(help="CA that signed --nats-tls-cert; every client verifies against it."),
    ] = None,
    partitions: Annotated[
        int,
        typer.Option(
            min=1,
            max=1024,
            help="Partitions of the workload streams; more than 1 runs every planner and "
            "executor active, each on its share (decision 0030).",
        ),
    ] = 1,
    planners: Annotated[
        int, typer.Option(min=1, help="Planner processes (active-active with --partitions).")
    ] = 1,
    executors: Annotated[
        int, typer.Option(min=1, help="Executor processes (active-active with --partitions).")
    ] = 1,
    messenger: Annotated[
        bool,
        typer.Option(
            "--messenger/--no-messenger",
            help="With the gateway: also answer requests sent through NATS "
            "(kaiwo-messenger.<namespace>.requests, decision 0057).",
        ),
    ] = True,
    tenant: Annotated[
        list[str] | None,
        typer.Option(
            help="A messenger tenant (repeatable): a namespace whose key, new at every start, "
            "may send requests to its Models and read their answers, nothing else.",
        ),
    ] = None,
    subscriber_namespace: Annotated[
        list[str] | None,
        typer.Option(
            help="A subscriber limited to one namespace (repeatable): a key, new at every "
            "start, <state-dir>/credentials/subscriber-<namespace>.nk, that reads that "
            "namespace's public workload events and nothing else (docs/events.md).",
        ),
    ] = None,
    one_process: Annotated[
        bool | None,
        typer.Option(
            "--one-process/--processes",
            help="The recorder, watcher, planner and executor in one process (the default: "
            "one interpreter's memory, less CPU per workload, on one core), or a process "
            "each (the default with more than one planner or executor); decision 0075.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start NATS, the event store and every service; stop them all on Ctrl-C."""
    if scheduler not in SCHEDULER_MODES:
        typer.echo(
            f"kaiwo up: --scheduler is one of {', '.join(SCHEDULER_MODES)}, not {scheduler!r}",
            err=True,
        )
        raise typer.Exit(2)
    replicated = max(planners, executors) > 1
    if one_process and replicated:
        typer.echo("kaiwo up: --one-process runs one planner and one executor", err=True)
        raise typer.Exit(2)
    if partitions == 1 and replicated:
        typer.echo(
            "kaiwo up: more than one planner or executor needs --partitions > 1 "
            "(one partition has one active replica)",
            err=True,
        )
        raise typer.Exit(2)
    if (nats_tls_cert is None) != (nats_tls_key is None):
        typer.echo("kaiwo up: --nats-tls-cert and --nats-tls-key go together", err=True)
        raise typer.Exit(2)
    tls = (
        ServerTls(
            cert_file=nats_tls_cert.resolve(),
            key_file=nats_tls_key.resolve(),
            ca_file=(nats_tls_ca.resolve() if nats_tls_ca else None),
        )
        if nats_tls_cert is not None and nats_tls_key is not None
        else None
    )
    if tenant and not (messenger and gateway_port):
        typer.echo("kaiwo up: --tenant needs the messenger and the gateway", err=True)
        raise typer.Exit(2)
    for namespace in tenant or ():
        try:
            tenant_key_name(namespace)
        except NotATenantError as error:
            typer.echo(f"kaiwo up: --tenant: {error}", err=True)
            raise typer.Exit(2) from None
    for namespace in subscriber_namespace or ():
        try:
            namespace_subscriber_name(namespace)
        except ValueError as error:
            typer.echo(f"kaiwo up: --subscriber-namespace: {error}", err=True)
            raise typer.Exit(2) from None
    options = StackOptions(
        state_dir=state_dir,
        kubeconfig=kubeconfig,
        fake_cluster=fake,
        install_crds=install_crds,
        scheduler=_mode(scheduler),
        nats_port=nats_port,
        nats_tls=tls,
        nats_cpus=nats_cpus or None,
        store_url=store,
        metrics_endpoint=metrics_endpoint,
        gateway_port=gateway_port or None,
        gateway_anonymous=gateway_anonymous,
        console_port=console_port or None,
        console_anonymous=console_anonymous,
        partitions=partitions,
        replicas={"planner": planners, "executor": executors},
        one_process=not replicated if one_process is None else one_process,
        messenger=messenger,
        messenger_tenants=tuple(tenant or ()),
        subscriber_namespaces=tuple(subscriber_namespace or ()),
    )
    typer.echo(identity_note(options), err=True)
    try:
        asyncio.run(_run(options))
    except StackError as error:
        typer.echo(f"kaiwo up: {error}", err=True)
        raise typer.Exit(2) from None


def identity_note(options: StackOptions) -> str:
    """The one line that says whose rights the services use: here, unlike in a cluster
    install, not least-privilege ServiceAccounts and no admission policy (docs/operations.md,
    "Threat model")."""
    if options.fake_cluster:
        return "kaiwo up: the services act as the fake cluster's administrator"
    where = options.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    return (
        f"kaiwo up: every service acts with your kubeconfig's identity ({where}) and all its "
        "rights, not the least-privilege ServiceAccounts of a cluster install"
    )


def _mode(text: str) -> SchedulerMode:
    return next(mode for mode in SCHEDULER_MODES if mode == text)


def console_line(options: StackOptions) -> str:
    """Where the console is and who may read it, in one line."""
    if options.console_url is None:
        return ""
    if options.console_anonymous:
        return (
            f"Console: {options.console_url} - anonymous access ON, loopback only: anyone on "
            "this machine sees every namespace (--console-tokens to require tokens)"
        )
    return (
        f"Console: {options.console_url} - sign in with a Kubernetes token; each reader sees "
        "the namespaces where it may list KaiwoJobs"
    )


async def _run(options: StackOptions) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    stack = LocalStack(options)
    with console.status("starting NATS, the event store and the services…"):
        started = await start_unless_stopped(stack, stop)
    if not started:
        console.print("kaiwo up: stopped during start-up; everything it started is stopped")
        return
    try:
        _print_summary(stack)
        await stop.wait()
    finally:
        with console.status("stopping…"):
            await stack.stop()


def _probes(port: int) -> str:
    """Where a service answers ``/healthz``, ``/readyz`` and ``/metrics`` (one port)."""
    return f"http://127.0.0.1:{port}/{{healthz,readyz,metrics}}"


def _print_summary(stack: LocalStack) -> None:
    assert stack.nats is not None
    table = Table(title="kaiwo is running (Ctrl-C stops it)", show_lines=False)
    table.add_column("part")
    table.add_column("where")
    kubeconfig = stack.kubeconfig or "$KUBECONFIG / ~/.kube/config"
    table.add_row("cluster", f"{kubeconfig} (kube-system uid {stack.cluster_uid})")
    table.add_row("scheduler", stack.scheduler_note)
    if stack.prerequisites_note:
        table.add_row("prerequisites", stack.prerequisites_note)
    assert stack.credentials is not None
    table.add_row("nats", f"{stack.nats.url} (127.0.0.1 only; NKey per service)")
    table.add_row("credentials", f"{stack.credentials.directory} (new at every start)")
    table.add_row("event store", redact_url(stack.options.event_store_url))
    table.add_row(
        "public events",
        f"kaiwo.public.> with {stack.credentials.seed(SUBSCRIBER)} (python examples/subscriber.py)",
    )
    for name, service in stack.services.items():
        if name == TOGETHER:
            members = ", ".join(stack.member_ports)
            table.add_row(name, f"pid {service.pid} ({members}), log {service.log_path}")
            continue
        table.add_row(
            name,
            f"pid {service.pid}, {_probes(service.health_port)}, log {service.log_path}",
        )
    for name, port in stack.member_ports.items():
        table.add_row(name, f"in {TOGETHER}, {_probes(port)}")
    for name, reason in stack.not_ready.items():
        if name not in stack.services:
            table.add_row(name, reason)
    console.print(table)
    if stack.cluster_note is not None:
        console.print(f"kaiwo up: {stack.cluster_note}", highlight=False)
    for name, reason in stack.not_ready.items():
        console.print(f"kaiwo up: {name}: {reason}; the rest runs without it", highlight=False)
    if stack.options.gateway_port is not None:
        console.print(gateway_line(stack.options), highlight=False)
    line = messenger_line(stack)
    if line:
        console.print(line, highlight=False)
    if stack.console_note is not None:
        console.print(f"kaiwo up: console: {stack.console_note}", highlight=False)
    if stack.options.console_url is not None:
        console.print(console_line(stack.options), highlight=False)
    console.print(
        next_steps(stack.options.state_dir, fake=stack.options.fake_cluster), highlight=False
    )


def messenger_line(stack: LocalStack) -> str:
    """Where requests go through NATS and which keys may send them, in one line."""
    options = stack.options
    if not options.messenger_on or "gateway" not in stack.services or stack.credentials is None:
        return ""  # no gateway (none asked for, or its port taken): nothing answers
    keys = ", ".join(
        f"{namespace}: {stack.credentials.seed(tenant_key_name(namespace))}"
        for namespace in options.messenger_tenants
    )
    return (
        "Messenger: requests on kaiwo-messenger.<namespace>.requests, answers on "
        "kaiwo-messenger.<namespace>.responses (python examples/batch_client.py; live on "
        "kaiwo-messenger.<namespace>.live); "
        + (f"tenant keys {keys}" if keys else "no tenant keys (--tenant <namespace> issues one)")
    )


def gateway_line(options: StackOptions) -> str:
    """Where the OpenAI API is and who may call it, in one line."""
    url = f"http://127.0.0.1:{options.gateway_port}/openai/v1"
    if options.gateway_anonymous:
        return (
            f"OpenAI API: {url} - anonymous access ON, loopback only: any process on this "
            "machine may call every Model without a token (--gateway-tokens to require them)"
        )
    return (
        f"OpenAI API: {url} - send a Kubernetes bearer token (kubectl create token ...); "
        "each caller may use the namespaces where it may get models"
    )


def next_steps(state_dir: Path, *, fake: bool) -> str:
    """The commands to try, as they work when typed in another shell (test_scientist_cli runs
    them as printed)."""
    where = (
        "In another shell here"
        if state_dir == DEFAULT_STATE_DIR
        else f"In another shell: export KAIWO_STATE={state_dir.resolve()}, then"
    )
    lines = [f"{where} (every kaiwo command finds this stack by its state directory):"]
    if fake:
        lines.append("  kaiwo apply -f examples/kaiwoqueueconfig.yaml")
    lines += [
        "  kaiwo submit -f examples/kaiwojob-gpu-training.yaml --wait",
        "  kaiwo list -A",
        "  kaiwo status ml-team/llama-3-8b-sft",
        "  kaiwo queues",
        "  kaiwo events explain ml-team/llama-3-8b-sft",
    ]
    return "\n".join(lines)
