"""The monitor: while it leads, scrape GPU utilization, judge it and publish what it found.

Every ``KAIWO_MONITOR_POLLING_INTERVAL_SECONDS`` the leader:

1. reads the KaiwoConfig ``kaiwo`` (defaults when there is none) for
   ``spec.resourceMonitoring`` and the GPU resource key;
2. queries the metrics endpoint (:mod:`kaiwo_monitor.prometheus`);
3. lists the pods carrying a workload uid (``kaiwo.silogen.ai/run-id``), in the target
   namespaces or everywhere;
4. finds the GPU workloads no Kaiwo kind owns among the pods with readings
   (:mod:`kaiwo_monitor.discovery`: their roots, decision 0047), and lists the KaiwoJobs,
   KaiwoServices and Namespaces for the GPU idle-preemption annotations
   (:mod:`kaiwo_contracts.gpu_preemption`); of the former only opted-in ones are judged;
5. :func:`~kaiwo_monitor.domain.utilization.assess` -> per workload ``UtilizationV1`` (the
   reading and the underutilized and idle stretches), and ``UnderutilizedV1`` when a
   workload falls below the threshold;
6. keeps each workload's open stretches in the key-value bucket after its events are
   stored, so a failed publish is repeated on the next tick and a new leader continues them.

The monitor decides nothing and never changes the cluster: the planner consumes
``UtilizationV1`` (consumer ``planner-mon``) and sets ``ResourceUnderutilization``,
terminates underutilized workloads and preempts idle ones. A failing step ends the tick
(counted in ``kaiwo_monitor_tick_failures_total`` or ``..._scrapes_total{outcome="error"}``,
logged) and the next tick starts over; a tick that ends early publishes nothing, so a
metrics endpoint that is down or answers garbage never moves a stretch on.

Only one instance acts: the one holding the ``monitor`` lease in NATS, through the same
:class:`~kaiwo_runtime.single_active.SingleActive` as the planner and the executor (decision
0025). The others wait as standbys; a leader that loses its lease stops ticking before the
lease can expire for the others, and :meth:`MonitorService.run` then raises
:class:`~kaiwo_runtime.startup.LeaseLostError` so the process restarts as a standby.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import structlog
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KAIWO_CONFIG_NAME, KaiwoConfig
from kaiwo_contracts.gpu_preemption import GpuPreemptionSettings, gpu_preemption_settings
from kaiwo_kube import KubeError, NotFound, resources
from kaiwo_runtime.bus import Bus
from kaiwo_runtime.kv import KeyValue, MemoryKeyValue
from kaiwo_runtime.logging import bound_context
from kaiwo_runtime.single_active import SingleActive
from kaiwo_runtime.startup import run_while_active, start_when_the_bus_answers
from pydantic import ValidationError

from kaiwo_monitor.cluster_port import ClusterReader
from kaiwo_monitor.discovery import ForeignWorkload, RootFinder, candidate_pods
from kaiwo_monitor.domain.pods import (
    RUN_ID_SELECTOR,
    MonitoredPod,
    in_their_workloads_namespace,
    monitored_pod,
)
from kaiwo_monitor.domain.samples import GpuSample, current_samples
from kaiwo_monitor.domain.utilization import (
    Assessment,
    MonitoringPolicy,
    UtilizationState,
    assess,
)
from kaiwo_monitor.findings import Finding, findings
from kaiwo_monitor.metrics import MonitorMetrics
from kaiwo_monitor.prometheus import ScrapeError, Scraper
from kaiwo_monitor.settings import MonitorSettings
from kaiwo_monitor.state_store import StateStore

log = structlog.get_logger("kaiwo.monitor")

GAP_TICKS = 3
"""Polling intervals without a reading an open stretch survives (:attr:`MonitorService.gap`)."""


class TickAborted(Exception):  # noqa: N818 - names what happened to the tick
    """A step of the tick failed; the reason is logged and counted."""


class MonitorService:
    """See the module docstring. Drive :meth:`run`, or :meth:`tick` directly in tests."""

    def __init__(
        self,
        bus: Bus,
        kube: ClusterReader,
        *,
        scraper: Scraper,
        clock: Callable[[], datetime],
        settings: MonitorSettings,
        single_active: SingleActive,
        kv: KeyValue | None = None,
        metrics: MonitorMetrics | None = None,
    ) -> None:
        self._bus = bus
        self._kube = kube
        self._scraper = scraper
        self._clock = clock
        self.settings = settings
        self.metrics = metrics or MonitorMetrics()
        self._store = StateStore(kv if kv is not None else MemoryKeyValue())
        self._roots = RootFinder(kube)
        self.single_active = single_active
        self.states: dict[str, UtilizationState] = {}
        self.last_scrape_failed = False
        self.endpoint_unreached: str | None = None
        """Why the metrics endpoint did not answer the last probe (None: it did, or no probe
        yet); a standby has no scrapes of its own to tell."""
        self.metrics.leader.set(0)

    # ------------------------------------------------------------------ lifecycle

    @property
    def leading(self) -> bool:
        """This instance holds the ``monitor`` lease and ticks."""
        return self.single_active.active

    @property
    def healthy(self) -> bool:
        """False while this instance leads and its last scrape failed."""
        return not (self.leading and self.last_scrape_failed)

    async def probe_endpoint(self) -> str | None:
        """Ask the metrics endpoint once; why it did not answer, or None.

        The monitor starts without its endpoint (a Prometheus that is late or gone must not
        stop the process, nor ``kaiwo up`` that waits for it): it reports itself not ready
        until the endpoint answers.
        """
        try:
            await self._scraper.scrape()
        except ScrapeError as error:
            self.endpoint_unreached = str(error)
            return self.endpoint_unreached
        self.endpoint_unreached = None
        return None

    async def endpoint_ready(self) -> bool:
        """Readiness of the metrics endpoint: the leader's last scrape, or for a process whose
        first probe failed and that does not scrape (yet), a new probe."""
        if self.leading:
            return self.healthy
        if self.endpoint_unreached is not None:
            await self.probe_endpoint()
        return self.endpoint_unreached is None

    async def run(self, stop: asyncio.Event) -> None:
        """Wait for the lease and, while holding it, tick every polling interval, until
        ``stop``; :class:`~kaiwo_runtime.startup.LeaseLostError` if the lease was lost."""
        if not self.settings.monitor_enabled:
            log.info("monitor disabled (KAIWO_MONITOR_ENABLED=false); idling")
            await stop.wait()
            return
        await run_while_active(self.single_active, self.lead, stop)

    async def lead(self, until: asyncio.Event) -> None:
        """The leader's work: continue the stretches the previous leader left, then tick
        until ``until`` is set (stop, or the lease could not be renewed)."""
        self.metrics.leader.set(1)
        try:
            pause = min(self.settings.monitor_polling_interval_seconds, 1.0)
            if not await start_when_the_bus_answers(
                self.load_states, until, what="the stretches", pause_seconds=pause
            ):
                return
            while not until.is_set():
                await self.tick(until=until)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        until.wait(), self.settings.monitor_polling_interval_seconds
                    )
        finally:
            self.metrics.leader.set(0)
            self.metrics.gpu_utilization.clear()

    async def load_states(self) -> None:
        """Read the open stretches the previous leader left in the bucket."""
        self.states = await self._store.load()

    # ------------------------------------------------------------------ one tick

    async def tick(self, *, until: asyncio.Event | None = None) -> Assessment | None:
        """Scrape, judge and publish once; None when a step failed (logged, counted).

        Publishing stops part-way once ``until`` is set: the lease may be someone else's."""
        now = self._clock()
        try:
            config = await self._read_config()
            samples = self._current(await self._scrape(), now=now)
            pods = await self._list_pods(config)
            foreign = await self._foreign_workloads(samples, pods)
            preemption, namespace_of = await self._preemption_settings(config, foreign)
        except TickAborted:
            return None
        pods = in_their_workloads_namespace(pods, namespace_of)
        pods += [pod for found in foreign if found.uid in preemption for pod in found.pods]
        policy = MonitoringPolicy.from_config(config.spec.resource_monitoring)
        self._count_missing(pods, samples)
        assessment = assess(
            pods=pods,
            samples=samples,
            states=self.states,
            policy=policy,
            now=now,
            preemption=preemption,
            gap=self.gap,
        )
        await self._publish(assessment, now=now, until=until)
        self._report(assessment)
        return assessment

    @property
    def gap(self) -> timedelta:
        """The longest time without a reading an open stretch survives: a missed scrape or
        two, and a slow one (decision 0173)."""
        interval = self.settings.monitor_polling_interval_seconds
        return timedelta(
            seconds=GAP_TICKS * interval + self.settings.monitor_scrape_timeout_seconds
        )

    async def _read_config(self) -> KaiwoConfig:
        try:
            found = await self._kube.get(resources.KAIWO_CONFIG, KAIWO_CONFIG_NAME)
        except NotFound:
            return KaiwoConfig.default()
        except KubeError as error:
            raise self._abort("config", "could not read the KaiwoConfig", error) from error
        try:
            return KaiwoConfig.from_wire(found)
        except ValidationError as error:
            raise self._abort("config", "the KaiwoConfig is invalid", error) from error

    async def _scrape(self) -> tuple[GpuSample, ...]:
        try:
            samples = await self._scraper.scrape()
        except ScrapeError as error:
            self.last_scrape_failed = True
            self.metrics.scrapes.labels(outcome=error.failure).inc()
            # No reading now: the last tick's ratios would show a use nobody measured.
            self.metrics.gpu_utilization.clear()
            log.warning(
                "scraping the metrics endpoint failed; nothing judged this tick",
                failure=error.failure,
                error=str(error),
            )
            raise TickAborted(str(error)) from error
        self.last_scrape_failed = False
        self.endpoint_unreached = None
        self.metrics.scrapes.labels(outcome="success").inc()
        return samples

    def _current(self, samples: tuple[GpuSample, ...], *, now: datetime) -> tuple[GpuSample, ...]:
        """The samples current at ``now``; frozen ones are counted, logged and dropped, so
        their pods count as unread (decision 0177)."""
        tolerance = timedelta(seconds=self.settings.monitor_sample_tolerance_seconds)
        current = current_samples(samples, now=now, tolerance=tolerance)
        kept = set(current)
        stale = [sample for sample in samples if sample not in kept]
        self.metrics.stale_samples.set(len(stale))
        if stale:
            log.info(
                "GPU samples older than the tolerance; their pods count as unread",
                samples=len(stale),
                first=f"{stale[0].namespace}/{stale[0].pod}",
                taken_at=stale[0].at.isoformat(),
            )
        return current

    async def _list_pods(self, config: KaiwoConfig) -> list[MonitoredPod]:
        # Across all namespaces: workloads opted in to idle preemption may live outside the
        # target namespaces of resource monitoring (assess filters by namespace).
        key = config.spec.nodes.default_gpu_resource_key
        try:
            listed = await self._kube.list(resources.POD, label_selector=RUN_ID_SELECTOR)
        except KubeError as error:
            raise self._abort("pods", "could not list the workload pods", error) from error
        found = (monitored_pod(item, gpu_resource_key=key) for item in listed.items)
        return [pod for pod in found if pod is not None]

    async def _foreign_workloads(
        self, samples: tuple[GpuSample, ...], pods: list[MonitoredPod]
    ) -> tuple[ForeignWorkload, ...]:
        candidates = candidate_pods(samples, pods)
        if not candidates:
            return ()
        try:
            return await self._roots.workloads(candidates)
        except KubeError as error:
            raise self._abort("pods", "could not list the pods with readings", error) from error

    async def _preemption_settings(
        self, config: KaiwoConfig, foreign: tuple[ForeignWorkload, ...] = ()
    ) -> tuple[dict[str, GpuPreemptionSettings], dict[str, str]]:
        """The idle-preemption settings of every opted-in workload, by uid: the KaiwoJobs
        and KaiwoServices, and the roots of ``foreign`` GPU workloads; and the namespace of
        each of them, by uid (whether opted in or not)."""
        try:
            namespaces = await self._kube.list(resources.NAMESPACE)
            workloads = [
                *(await self._kube.list(resources.KAIWO_JOB)).items,
                *(await self._kube.list(resources.KAIWO_SERVICE)).items,
            ]
        except KubeError as error:
            raise self._abort("workloads", "could not list the workloads", error) from error
        by_namespace = {
            str((item.get("metadata") or {}).get("name")): _annotations(item)
            for item in namespaces.items
        }
        found: dict[str, GpuPreemptionSettings] = {}
        namespace_of: dict[str, str] = {}
        for workload in workloads:
            meta = workload.get("metadata") or {}
            if meta.get("uid"):
                namespace_of[str(meta["uid"])] = str(meta.get("namespace") or "")
            settings = gpu_preemption_settings(
                workload_annotations=_annotations(workload),
                namespace_annotations=by_namespace.get(str(meta.get("namespace")), {}),
                config=config.spec.gpu_preemption,
            )
            if settings is not None and meta.get("uid"):
                found[str(meta["uid"])] = settings
        for root in foreign:
            namespace = str((root.root.get("metadata") or {}).get("namespace") or "")
            if root.uid:
                namespace_of[root.uid] = namespace
            settings = gpu_preemption_settings(
                workload_annotations=root.annotations,
                namespace_annotations=by_namespace.get(namespace, {}),
                config=config.spec.gpu_preemption,
            )
            if settings is not None and root.uid:
                found[root.uid] = settings
        return found, namespace_of

    def _count_missing(self, pods: list[MonitoredPod], samples: tuple[GpuSample, ...]) -> None:
        """Running GPU pods the endpoint has no reading for: counted and logged, never acted on."""
        reported = {(sample.namespace, sample.pod) for sample in samples}
        missing = [
            pod
            for pod in pods
            if pod.running and pod.requested_gpus > 0 and (pod.namespace, pod.name) not in reported
        ]
        self.metrics.pods_without_readings.set(len(missing))
        if missing:
            log.info(
                "running GPU pods without readings; their workloads are not judged",
                pods=len(missing),
                first=f"{missing[0].namespace}/{missing[0].name}",
            )

    async def _publish(
        self, assessment: Assessment, *, now: datetime, until: asyncio.Event | None
    ) -> None:
        """Per workload: its events, then its state; stop at the first failure."""
        by_uid: dict[str, list[Finding]] = defaultdict(list)
        for finding in findings(assessment, now=now):
            by_uid[finding.uid].append(finding)
        before, after = dict(self.states), assessment.states
        for uid in sorted(set(before) | set(after) | set(by_uid)):
            if until is not None and until.is_set():
                log.info("the lease ends during a tick; leaving the rest to the next leader")
                return
            with bound_context({"correlation_id": uid, "uid": uid}):
                try:
                    for finding in by_uid.get(uid, ()):
                        ack = await self._bus.publish(finding.envelope, finding.subject)
                        if not ack.duplicate:
                            self.metrics.events_published.labels(topic=finding.topic).inc()
                        if finding.topic != "utilization":
                            log.info("published", topic=finding.topic, event_id=finding.envelope.id)
                    await self._store.save(uid, before=before, after=after)
                except Exception as error:  # the bus or the bucket: retried next tick
                    self.metrics.tick_failures.labels(stage="publish").inc()
                    log.warning("publishing monitor findings failed", error=str(error))
                    return
            self._remember(uid, after.get(uid))

    def _remember(self, uid: str, state: UtilizationState | None) -> None:
        if state is None:
            self.states.pop(uid, None)
        else:
            self.states[uid] = state

    def _report(self, assessment: Assessment) -> None:
        ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
        for item in assessment.utilizations:
            if item.ratio is not None:
                ratios[(item.workload.namespace or "", item.workload.kind)].append(item.ratio)
        self.metrics.gpu_utilization.clear()
        for (namespace, kind), values in ratios.items():
            self.metrics.gpu_utilization.labels(namespace=namespace, workload_kind=kind).set(
                sum(values) / len(values)
            )

    def _abort(self, stage: str, what: str, error: Exception) -> TickAborted:
        self.metrics.tick_failures.labels(stage=stage).inc()
        log.warning(what, error=" ".join(str(error).split()))
        return TickAborted(what)


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    found = (obj.get("metadata") or {}).get("annotations") or {}
    return {str(key): str(value) for key, value in found.items()}
