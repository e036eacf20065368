"""``kaiwo nats``: the bus's credentials and topology for deployments other than ``kaiwo up``.

* ``credentials`` — one NKey per identity (the administrator, each service, the CLI, any
  ``--reader``, any messenger ``--tenant`` and any ``--subscriber-namespace``) and the
  nats-server configuration with their permissions, into one directory (files 0600, the
  directory 0700). ``deploy/compose`` and ``deploy/k8s`` read them from there (``make
  nats-credentials``); ``--helm-values`` writes the same as a values file for the Helm chart,
  which never holds keys among its own files (a packaged chart would carry them).
* ``provision`` — declare the streams and the operator's consumers as the administrator
  (``KAIWO_NATS_URL``, ``KAIWO_NATS_CREDENTIALS_FILE``, ``KAIWO_NATS_TLS_*``): the init step
  of compose and the Job of the Kubernetes deployment. The services only check for them.
  ``--messenger`` declares the messenger's streams and consumer too (decision 0049).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
import yaml
from kaiwo_contracts.events.identity_names import STATE_BUCKETS
from kaiwo_contracts.events.messenger import messenger_topology
from kaiwo_contracts.events.permissions import (
    ADMIN,
    namespace_subscriber_identity,
    operator_identities,
    reader_identity,
    tenant_identity,
)
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_runtime.kv import declare_buckets
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_credentials import (
    CredentialsDirectory,
    ServerTls,
    write_credentials,
    write_private,
)
from kaiwo_runtime.redaction import redact_secrets
from kaiwo_runtime.settings import ServiceSettings, SingleActiveSettings

app = typer.Typer(
    name="nats",
    help="NATS credentials and stream provisioning for compose and Kubernetes.",
    no_args_is_help=True,
)


@app.command("credentials")
def credentials(
    *,
    out: Annotated[Path, typer.Option(help="Directory for nats-server.conf and the keys.")],
    reader: Annotated[
        list[str] | None,
        typer.Option(
            help="A read-only reader of the internal streams (repeatable); docs/bus-internals.md."
        ),
    ] = None,
    tenant: Annotated[
        list[str] | None,
        typer.Option(
            help="A messenger tenant (repeatable): a namespace whose key may send requests to "
            "its Models and read their answers, nothing else (decision 0049)."
        ),
    ] = None,
    subscriber_namespace: Annotated[
        list[str] | None,
        typer.Option(
            help="A subscriber limited to one namespace (repeatable): its key "
            "subscriber-<namespace>.nk reads that namespace's public workload events, live "
            "or through its durable consumer subscriber-<namespace>, nothing else "
            "(docs/events.md)."
        ),
    ] = None,
    partitions: Annotated[
        int, typer.Option(min=1, help="KAIWO_BUS_PARTITIONS of the deployment.")
    ] = 1,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep/--rotate",
            help="Keep the keys already in --out (to add a reader) or issue all anew.",
        ),
    ] = False,
    tls_cert: Annotated[
        str | None, typer.Option(help="Server certificate path, as the NATS server sees it.")
    ] = None,
    tls_key: Annotated[str | None, typer.Option(help="Server key path, as the server sees it.")] = (
        None
    ),
    tls_ca: Annotated[
        str | None, typer.Option(help="CA for client certificates (with --verify-clients).")
    ] = None,
    verify_clients: Annotated[
        bool, typer.Option(help="Require client certificates signed by --tls-ca.")
    ] = False,
    http: Annotated[
        str | None,
        typer.Option(help="Serve the monitoring endpoint here only, e.g. 127.0.0.1:8222."),
    ] = None,
    helm_values: Annotated[
        Path | None,
        typer.Option(
            help="Also write the configuration and keys as a values file for the Helm chart "
            "(secret, 0600): helm install -f FILE."
        ),
    ] = None,
) -> None:
    """Write one key per identity and the server configuration that admits exactly them."""
    if (tls_cert is None) != (tls_key is None):
        typer.echo("kaiwo nats credentials: --tls-cert and --tls-key go together", err=True)
        raise typer.Exit(2)
    if verify_clients and tls_ca is None:
        typer.echo("kaiwo nats credentials: --verify-clients needs --tls-ca", err=True)
        raise typer.Exit(2)
    tls = (
        ServerTls(
            cert_file=Path(tls_cert),
            key_file=Path(tls_key),
            ca_file=Path(tls_ca) if tls_ca else None,
            verify_clients=verify_clients,
        )
        if tls_cert is not None and tls_key is not None
        else None
    )
    try:
        readers = [reader_identity(name) for name in reader or ()]
        readers += [tenant_identity(namespace) for namespace in tenant or ()]
        readers += [
            namespace_subscriber_identity(namespace) for namespace in subscriber_namespace or ()
        ]
    except ValueError as error:
        typer.echo(f"kaiwo nats credentials: {error}", err=True)
        raise typer.Exit(2) from None
    written = write_credentials(
        out,
        (*operator_identities(bus_topology(partitions=partitions)), *readers),
        tls=tls,
        http=http,
        keep_existing=keep,
    )
    typer.echo(f"{written.server_config}: the server configuration (public keys only)")
    for name, seed in written.seeds.items():
        typer.echo(f"{seed}: the key of {name} (secret, 0600)")
    if helm_values is not None:
        write_private(helm_values, chart_values(written).encode())
        typer.echo(f"{helm_values}: all of it as Helm values (secret, 0600)")


def chart_values(written: CredentialsDirectory) -> str:
    """The Helm chart's ``nats.credentials``: the server configuration and every key."""
    credentials = {
        "config": written.server_config.read_text(),
        "keys": {name: seed.read_text().strip() for name, seed in written.seeds.items()},
    }
    header = (
        "# NATS credentials for deploy/helm/kaiwo (make nats-credentials): secret, never in git\n"
    )
    return header + yaml.safe_dump({"nats": {"credentials": credentials}}, sort_keys=False)


@app.command("provision")
def provision(
    *,
    within: Annotated[
        float, typer.Option(help="Seconds to keep trying to reach NATS.", min=1)
    ] = 60.0,
    messenger: Annotated[
        bool,
        typer.Option(
            help="Also declare the messenger's streams and consumer (KAIWO_MESSENGER_ENABLED)."
        ),
    ] = False,
) -> None:
    """Declare the streams and consumers as the administrator (settings from KAIWO_NATS_*)."""
    settings = ServiceSettings()
    try:
        asyncio.run(_provision(settings, within=within, messenger=messenger))
    except Exception as error:  # one line, never a secret
        typer.echo(f"kaiwo nats provision: {redact_secrets(str(error))}", err=True)
        raise typer.Exit(1) from None
    typer.echo("streams and consumers declared")


async def _provision(settings: ServiceSettings, *, within: float, messenger: bool) -> None:
    connection = settings.nats_connection(ADMIN)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            bus = await asyncio.wait_for(
                NatsBus.connect(connection, topology=settings.bus_topology()),
                timeout=10,
            )
            break
        except Exception as error:
            if loop.time() >= deadline:
                raise RuntimeError(
                    f"NATS at {connection.redacted_url} is unreachable: {error}"
                ) from error
            await asyncio.sleep(1)
    try:
        while True:
            try:
                await asyncio.wait_for(
                    _declare(bus, settings, messenger=messenger),
                    timeout=max(deadline - loop.time(), 1.0),
                )
                break
            except Exception as error:
                if not _forming(error) or loop.time() >= deadline:
                    raise
                await asyncio.sleep(1)
    except TimeoutError as error:
        raise RuntimeError(
            f"declaring the streams and consumers failed: JetStream did not answer within "
            f"{within:g} s; is KAIWO_NATS_CREDENTIALS_FILE the administrator's key, and has "
            "the NATS cluster formed?"
        ) from error
    except Exception as error:
        raise RuntimeError(
            f"declaring the streams and consumers failed ({str(error) or type(error).__name__}): "
            "is KAIWO_NATS_CREDENTIALS_FILE the administrator's key?"
        ) from error
    finally:
        await bus.close()


async def _declare(bus: NatsBus, settings: ServiceSettings, *, messenger: bool) -> None:
    await bus.ensure_streams()
    # Every bucket, before any service key could make one of its name capture other
    # subjects (decision 0222); the leases with the duration the services are given.
    leases = SingleActiveSettings()
    await declare_buckets(
        bus.client,
        {**dict.fromkeys(STATE_BUCKETS), leases.lease_bucket: leases.lease_seconds},
        replicas=settings.bus_stream_replicas,
    )
    if messenger:
        await bus.declare(messenger_topology(replicas=settings.bus_stream_replicas))


_CLUSTER_FORMING_CODES = frozenset({10005, 10008})
"""JetStream's "no suitable peers for placement" and "temporarily unavailable"."""


def _forming(error: Exception) -> bool:
    """A cluster still forming: no peers yet to place a replicated stream on, or no
    JetStream leader at all, so a request goes unanswered (nats-py's TimeoutError); both
    pass once the servers have a quorum. A key that may not read its replies looks the
    same, which is why the deadline's error names both."""
    return isinstance(error, TimeoutError) or (
        getattr(error, "err_code", None) in _CLUSTER_FORMING_CODES
    )
