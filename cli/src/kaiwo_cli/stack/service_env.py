"""The environment each service of ``kaiwo up`` starts with: where NATS, the event store and the
cluster are, its health port, and the optional services' settings (pure)."""

from __future__ import annotations

from pathlib import Path

from kaiwo_cli.stack.options import StackOptions


def service_env(
    options: StackOptions,
    *,
    nats_url: str,
    kubeconfig: Path | None,
    metrics_endpoint: str | None,
    health_port: int,
    health_fd: int | None,
    console_fd: int | None,
) -> dict[str, str]:
    """``health_fd`` and ``console_fd``: the service's health socket and the console's
    listening socket, bound on ``health_port`` and the console's port, which the service
    inherits (see :mod:`kaiwo_cli.stack.ports`)."""
    env = {
        "KAIWO_NATS_URL": nats_url,
        # The administrator declared the topology; each service only checks it.
        "KAIWO_NATS_DECLARE_STREAMS": "false",
        "KAIWO_HEALTH_HOST": "127.0.0.1",
        "KAIWO_HEALTH_PORT": str(health_port),
        **({} if health_fd is None else {"KAIWO_HEALTH_LISTEN_FD": str(health_fd)}),
        "KAIWO_EVENTSTORE_URL": options.event_store_url,
        "KAIWO_LOG_FORMAT": "json",
        # A crashed planner's restart waits out its own lease (or, with partitions, the
        # other replicas take its partitions over once its leases run out).
        "KAIWO_LEASE_SECONDS": "5",
        "KAIWO_BUS_PARTITIONS": str(options.partitions),
    }
    if options.nats_tls is not None and options.nats_tls.ca_file is not None:
        env["KAIWO_NATS_TLS_CA_FILE"] = str(options.nats_tls.ca_file.resolve())
    if kubeconfig is not None:
        env["KAIWO_KUBECONFIG"] = str(kubeconfig.resolve())
    if metrics_endpoint:
        env["KAIWO_MONITOR_METRICS_ENDPOINT"] = metrics_endpoint
    if options.gateway_port is not None:
        env["KAIWO_GATEWAY_HOST"] = "127.0.0.1"
        env["KAIWO_GATEWAY_PORT"] = str(options.gateway_port)
        env["KAIWO_GATEWAY_ANONYMOUS"] = "loopback" if options.gateway_anonymous else "off"
        env["KAIWO_MESSENGER_ENABLED"] = "true" if options.messenger_on else "false"
    if options.console_port is not None:
        env["KAIWO_CONSOLE_HOST"] = "127.0.0.1"
        env["KAIWO_CONSOLE_PORT"] = str(options.console_port)
        if console_fd is not None:
            env["KAIWO_CONSOLE_LISTEN_FD"] = str(console_fd)
        env["KAIWO_CONSOLE_ANONYMOUS"] = "loopback" if options.console_anonymous else "off"
    return {**env, **options.service_env}
