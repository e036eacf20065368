"""Every metric of the gateway (``kaiwo_gateway_*``) and of the autoscaler it may lead
(``kaiwo_autoscaler_*``). Labels carry the Model's namespace and name (a bounded set, as
upstream's ``request_model``) and, for endpoint choice, the endpoint (``<namespace>/<pod>``,
as upstream's hash-lookup counters)."""

from __future__ import annotations

from kaiwo_runtime.metrics import MetricsRegistry

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
WAIT_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class GatewayMetrics:
    """The gateway's counters, gauges and histograms, created in ``registry``."""

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = registry or MetricsRegistry()
        self.requests = self.registry.counter(
            "gateway_requests",
            "Requests answered, by route, Model and status code (a Model of '' was not found)",
            ("route", "namespace", "model", "code"),
        )
        self.in_flight = self.registry.gauge(
            "gateway_requests_in_flight",
            "Requests being proxied (waiting for an endpoint included), per Model",
            ("namespace", "model"),
        )
        self.latency = self.registry.histogram(
            "gateway_request_duration_seconds",
            "From the request's arrival to the last byte of the response, per route and Model",
            ("route", "namespace", "model"),
            buckets=LATENCY_BUCKETS,
        )
        self.retries = self.registry.counter(
            "gateway_retries",
            "Requests sent to another endpoint after a connection failed before a byte was sent",
            ("namespace", "model"),
        )
        self.endpoint_choices = self.registry.counter(
            "gateway_endpoint_choices",
            "Endpoints chosen, by strategy; home=false when the endpoint is not the first the "
            "strategy looked at (PrefixHash: the prefix spilled off its endpoint on the ring, "
            "upstream's hash lookup 'initial' against 'final'); fallback=true when PrefixHash "
            "found none under the load bound",
            ("namespace", "model", "endpoint", "strategy", "home", "fallback"),
        )
        self.messages = self.registry.counter(
            "gateway_messenger_messages",
            "Messenger requests settled, by tenant namespace and outcome (answered: its answer "
            "is stored; redelivered: left for another delivery; dead: answered with the error "
            "and kept as a dead letter; unpublished: its answer could not be stored)",
            ("namespace", "outcome"),
        )
        self.message_latency = self.registry.histogram(
            "gateway_messenger_duration_seconds",
            "From a messenger request's delivery to its answer stored, per tenant namespace",
            ("namespace",),
            buckets=LATENCY_BUCKETS,
        )
        self.endpoints = self.registry.gauge(
            "gateway_endpoints",
            "Ready endpoints known per Model",
            ("namespace", "model"),
        )
        self.access_checks = self.registry.counter(
            "gateway_access_checks",
            "Callers' tokens and namespaces checked, by check (token, namespace), answer "
            "(allowed, refused; error: the API server did not answer; busy: too many tokens "
            "in review) and source (cache, api_server)",
            ("check", "answer", "source"),
        )
        self.refused = self.registry.counter(
            "gateway_refused_requests",
            "Requests refused before they reached a Model, by reason (unauthenticated, "
            "unavailable, busy, too_many_requests, too_many_bytes, too_large, too_deep, "
            "unsupported_encoding, undecodable_body, unreadable_body)",
            ("reason",),
        )
        self.observations = self.registry.counter(
            "gateway_observations",
            "Observations read from the bus, by kind and outcome (applied, unchanged, malformed)",
            ("kind", "outcome"),
        )
        self.endpoint_waits = self.registry.counter(
            "gateway_endpoint_waits",
            "Requests that waited for a ready endpoint, by outcome (ready, timeout, "
            "not_scalable: autoscaling disabled at zero replicas, not_configured: the "
            "operator makes no server of the spec, client_gone: the HTTP client hung up, "
            "model_gone: the Model was deleted or stopped validating meanwhile) "
            "and whether the Model was at zero replicas (scale from zero)",
            ("namespace", "model", "outcome", "from_zero"),
        )
        self.endpoint_wait = self.registry.histogram(
            "gateway_endpoint_wait_seconds",
            "How long requests waited for a ready endpoint (a Model scaling from zero included)",
            ("namespace", "model", "from_zero"),
            buckets=WAIT_BUCKETS,
        )
        self.load_reports = self.registry.counter(
            "gateway_load_reports",
            "This replica's load reports (active requests per Model), by outcome "
            "(published, failed) and why (interval, waiting: a request waits for an endpoint)",
            ("outcome", "trigger"),
        )
        self.autoscaler_leading = self.registry.gauge(
            "autoscaler_leading",
            "1 while this replica holds the autoscaler lease and runs the autoscaler",
        )
        self.autoscaler_ticks = self.registry.counter(
            "autoscaler_ticks",
            "Autoscaler ticks, by outcome (sampled; skipped: no fresh load report)",
            ("outcome",),
        )
        self.autoscaler_reports = self.registry.counter(
            "autoscaler_reports",
            "Load reports received from the gateway replicas, by outcome (taken, malformed)",
            ("outcome",),
        )
        self.autoscaler_decisions = self.registry.counter(
            "autoscaler_decisions",
            "Scale decisions published, by cause (load, request) and direction (up, down; same: "
            "the replicas restated as the load crosses maxReplicas)",
            ("namespace", "model", "cause", "direction"),
        )
        self.autoscaler_active_requests = self.registry.gauge(
            "autoscaler_active_requests",
            "Active requests summed over the gateway replicas at the last tick",
            ("namespace", "model"),
        )
        self.autoscaler_average = self.registry.gauge(
            "autoscaler_average_active_requests",
            "The moving average of active requests the last decision was made from",
            ("namespace", "model"),
        )
