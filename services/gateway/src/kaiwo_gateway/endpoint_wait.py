"""Waiting for a ready endpoint of a Model: the balancer's choice, or a wait (counted, so a
Model at zero replicas is scaled up by the request) until the catalog has news or time runs out.

The proxy and the messenger both come here (:meth:`EndpointWaiter.endpoint_for`). The proxy
also says how to tell that its HTTP client has hung up: such a request stops waiting (and
counting) within :data:`CLIENT_CHECK_SECONDS` (aiohttp does not cancel its handler)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from kaiwo_contracts.plans import ObjectRef

from kaiwo_gateway.domain.autoscaling import ScalingSpec, replicas_for_a_request
from kaiwo_gateway.domain.balancing import Balancer, Choice
from kaiwo_gateway.domain.catalog import Catalog, Endpoint, ServedModel
from kaiwo_gateway.domain.load import RequestCounts, model_ref
from kaiwo_gateway.domain.routing import (
    Route,
)
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.openai_errors import OpenAIError

CLIENT_CHECK_SECONDS = 0.5
"""How often a waiting request looks whether its HTTP client is still there."""


@dataclass
class Wait:
    """A request waiting for a ready endpoint of its Model."""

    model: ObjectRef
    started: float
    from_zero: bool
    outcome: str = "timeout"


class ClientGoneError(OpenAIError):
    """The HTTP client hung up while its request waited for an endpoint (nobody reads the
    answer; 499 in the request metrics, as nginx names it)."""


@dataclass
class LoadTracking:
    """This replica's requests per Model, and what to do when one first waits."""

    counts: RequestCounts = field(default_factory=RequestCounts)
    on_first_wait: Callable[[], None] = lambda: None


class EndpointWaiter:
    """Requests waiting for an endpoint, woken together whenever the catalog changes."""

    def __init__(
        self, *, catalog: Catalog, balancer: Balancer, metrics: GatewayMetrics, load: LoadTracking
    ) -> None:
        self.catalog = catalog
        self.balancer = balancer
        self.metrics = metrics
        self.load = load
        self._changed = asyncio.Event()

    def wake(self) -> None:
        """Wake every request waiting for an endpoint (the catalog has news)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def endpoint_for(
        self,
        route: Route,
        *,
        prefix: str,
        exclude: set[str],
        wait_seconds: float,
        client_gone: Callable[[], bool] | None = None,
    ) -> Choice:
        """The endpoint for this attempt, waiting up to ``wait_seconds`` for one while the
        Model has none ready (the wait is counted, so it scales the Model from zero); the
        messenger's requests come here too (without ``client_gone``). A request whose
        ``client_gone()`` turns true while it waits stops waiting, as ``client_gone``. The
        caller releases the choice (``balancer.release``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        wait: Wait | None = None
        check_every = CLIENT_CHECK_SECONDS if client_gone is not None else wait_seconds
        try:
            while True:
                if wait is not None and client_gone is not None and client_gone():
                    wait.outcome = "client_gone"
                    raise ClientGoneError(
                        499, "the client closed the connection", kind="client_gone"
                    )
                changed = self._changed
                endpoints = self.catalog.endpoints(route.model)
                choice = self._choose(route, endpoints, prefix, exclude)
                if choice is not None:
                    if wait is not None:
                        wait.outcome = "ready"
                    return choice
                if exclude and any(e.key in exclude for e in endpoints):
                    raise OpenAIError(
                        502,
                        f"Bad Gateway: no endpoint of model {route.model.name!r} accepted a "
                        f"connection ({len(exclude)} tried)",
                        kind="server_error",
                    )
                current = self._still_servable(route.model, wait)
                if wait is None:
                    wait = self._start_waiting(current, at=loop.time())
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise _no_endpoint(route, current, wait_seconds, wait)
                try:
                    await asyncio.wait_for(changed.wait(), min(remaining, check_every))
                except TimeoutError:
                    continue
        finally:
            if wait is not None:
                self._stop_waiting(wait, at=loop.time())

    def _still_servable(self, model: ServedModel, wait: Wait | None) -> ServedModel:
        """The Model as the catalog holds it now; an error when no server of it will come:
        it is gone (deleted, or its spec no longer validates), or the operator makes none."""
        current = self.catalog.model(model.uid)
        if current is None:
            if wait is not None:  # counted when it stops waiting
                wait.outcome = "model_gone"
            raise _model_gone(model)
        if current.not_configured is not None:
            if wait is not None:
                wait.outcome = "not_configured"
            raise self._not_configured(current, counted=wait is not None)
        return current

    def _start_waiting(self, model: ServedModel, *, at: float) -> Wait:
        """Count the request as waiting (the first one reports at once); a Model at zero
        replicas whose autoscaling is disabled is refused instead: no request scales it."""
        key = model_ref(uid=model.uid, namespace=model.namespace, name=model.name)
        if _never_scaled_by_requests(model.scaling):
            self.metrics.endpoint_waits.labels(
                namespace=model.namespace,
                model=model.name,
                outcome="not_scalable",
                from_zero="true",
            ).inc()
            raise OpenAIError(
                503,
                f"model {model.name!r} has 0 replicas and autoscalingDisabled is set, so no "
                "request scales it up: scale it (kubectl scale model/"
                f"{model.name} -n {model.namespace} --replicas=1) or enable autoscaling",
                kind="server_error",
                code="model_scaled_to_zero",
            )
        from_zero = replicas_for_a_request(model.scaling) is not None
        if self.load.counts.wait_started(key):
            self.load.on_first_wait()
        return Wait(model=key, started=at, from_zero=from_zero)

    def _not_configured(self, model: ServedModel, *, counted: bool) -> OpenAIError:
        """A Model the operator makes no Pod for, as its status says: refused at once (or as
        soon as that is observed while the request waits), naming why; it is not scaled up,
        as no server would come."""
        if not counted:
            from_zero = replicas_for_a_request(model.scaling) is not None
            self.metrics.endpoint_waits.labels(
                namespace=model.namespace,
                model=model.name,
                outcome="not_configured",
                from_zero="true" if from_zero else "false",
            ).inc()
        return OpenAIError(
            503,
            f"model {model.name!r} has no server and the operator makes none: "
            f"{model.not_configured} (its Configured condition; "
            f"kubectl describe model/{model.name} -n {model.namespace})",
            kind="server_error",
            code="model_not_configured",
        )

    def _stop_waiting(self, wait: Wait, *, at: float) -> None:
        self.load.counts.wait_ended(wait.model)
        labels = {"namespace": wait.model.namespace, "model": wait.model.name}
        from_zero = "true" if wait.from_zero else "false"
        self.metrics.endpoint_waits.labels(
            **labels, outcome=wait.outcome, from_zero=from_zero
        ).inc()
        self.metrics.endpoint_wait.labels(**labels, from_zero=from_zero).observe(at - wait.started)

    def _choose(
        self, route: Route, endpoints: tuple[Endpoint, ...], prefix: str, exclude: set[str]
    ) -> Choice | None:
        model = route.model
        choice = self.balancer.choose(
            group=model.uid,
            endpoints=endpoints,
            strategy=model.strategy,
            adapter=route.adapter,
            prefix=prefix,
            replication=model.prefix_hash.replication,
            mean_load_factor=model.prefix_hash.mean_load_factor,
            exclude=exclude,
        )
        if choice is not None:
            self.metrics.endpoint_choices.labels(
                namespace=model.namespace,
                model=model.name,
                endpoint=choice.endpoint.key,
                strategy=model.strategy,
                home="true" if choice.endpoint.key == choice.first else "false",
                fallback="true" if choice.fallback else "false",
            ).inc()
        return choice


def _never_scaled_by_requests(scaling: ScalingSpec) -> bool:
    return scaling.autoscaling_disabled and (scaling.replicas or 0) == 0


def _no_endpoint(route: Route, model: ServedModel, waited: float, wait: Wait) -> OpenAIError:
    adapter = f" with adapter {route.adapter!r}" if route.adapter else ""
    why = (
        " (the model was at 0 replicas: one was asked for and is not ready yet; "
        "model servers may take minutes to start, try again)"
        if wait.from_zero
        else ""
    )
    return OpenAIError(
        503,
        f"no ready endpoint of model {model.name!r}{adapter} within {waited:g}s{why}",
        kind="server_error",
        code="no_ready_endpoint",
    )


def _model_gone(model: ServedModel) -> OpenAIError:
    """The Model was deleted (or its spec stopped validating) while a request waited for one
    of its servers: none will come, so the request is answered at once as for a Model that
    does not exist, not after the whole wait with a 503."""
    return OpenAIError(
        404,
        f"model {model.name!r} is no longer served in namespace {model.namespace!r}: it was "
        "deleted, or its spec no longer validates, while the request waited for a server",
        kind="invalid_request_error",
        code="model_not_found",
        param="model",
    )
