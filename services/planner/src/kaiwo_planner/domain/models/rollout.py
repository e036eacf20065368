"""Which server Pods to create and which to delete: upstream's Pod plan (§5), from the Pods
observed.

Pods, not a Deployment, as upstream. Each plan looks at the Model's live Pods (those being
deleted do not count: they are going, and their replacements should not wait for them) and
decides:

0. a Pod that has finished (phase ``Failed`` or ``Succeeded``: evicted by its kubelet under
   node pressure, or stopped by a node shutdown) never runs again, and nothing else removes
   a bare Pod: it is deleted, and it does not count as live, so it is replaced as a
   ReplicaSet replaces one (upstream counts it, and the Model kept it in place of a serving
   replica for good; decision 0253);

1. the wanted count is the replicas, plus ``surge`` while any Pod is out of date (its
   ``pod-hash`` is not the current spec's);
2. Pods beyond that count go, first in *deletion order*: not Ready before Ready, unscheduled
   before scheduled, out of date before current, younger before older; missing ones are
   created;
3. then, in the same order, each out-of-date Pod that is not Ready is deleted at once and
   replaced, and at most one that is Ready is replaced, and only when every wanted Pod is
   Ready: a rollout moves one Ready Pod per observed step and never goes below the replicas
   that serve. The last ``surge`` replacements are not made (the surge Pod stays instead).

A deleted Pod is thus replaced by the next plan (recovery), and a changed spec rolls every
Pod with at most ``surge`` extra.

New Pods are named ``model-<name>-<hash>-<slot>``, the lowest slots no observed Pod uses, so
a plan made again before the Pods it created are observed asks for the same Pods (the
executor's create is then a no-op) rather than more of them. (Upstream names them randomly
and sleeps 3 s after each change for its cache to catch up, and still makes duplicates,
issue #442.) The one duplicate left: a plan made after a deleted Pod has gone but before its
replacement is observed picks the freed slot again; the next plan removes the extra Pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_planner.domain.models.names import ADAPTER_LABEL_PREFIX, LABEL_POD_HASH
from kaiwo_planner.domain.status.child_health import pod_trouble

FINISHED_PHASES: Final = frozenset({"Failed", "Succeeded"})


@dataclass(frozen=True, slots=True)
class ObservedPod:
    """The facts about one server Pod the plan uses."""

    name: str
    uid: str
    pod_hash: str
    ready: bool
    scheduled: bool
    created: str
    terminating: bool
    adapters: tuple[tuple[str, str], ...] = ()
    """The Pod's ``adapter.kubeai.org/<name>`` labels (what its adapter loader reports)."""
    trouble: str = ""
    """What keeps a container of the Pod from running, in words ("pod p: container server is
    waiting: ImagePullBackOff (...)"); empty when nothing does (decision 0134)."""
    finished: bool = False
    """The Pod's phase is ``Failed`` or ``Succeeded``: its containers will not run again."""

    @classmethod
    def from_wire(cls, pod: Mapping[str, Any]) -> ObservedPod:
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        labels = meta.get("labels") or {}
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            pod_hash=str(labels.get(LABEL_POD_HASH) or ""),
            ready=any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or ()
                if isinstance(c, Mapping)
            ),
            scheduled=bool((pod.get("spec") or {}).get("nodeName")),
            created=str(meta.get("creationTimestamp") or ""),
            terminating=bool(meta.get("deletionTimestamp")),
            adapters=tuple(
                sorted(
                    (str(key)[len(ADAPTER_LABEL_PREFIX) :], str(value))
                    for key, value in labels.items()
                    if str(key).startswith(ADAPTER_LABEL_PREFIX)
                )
            ),
            trouble=(pod_trouble(pod) or ("", ""))[1],
            finished=status.get("phase") in FINISHED_PHASES,
        )


@dataclass(frozen=True, slots=True)
class PodDecision:
    """What the Pods of a Model become: ``keep`` and ``create`` are the current-spec Pods
    wanted (by name), ``delete`` the Pods to delete now."""

    keep: tuple[str, ...]
    create: tuple[str, ...]
    delete: tuple[ObservedPod, ...]
    out_of_date: int

    @property
    def wanted(self) -> tuple[str, ...]:
        return tuple(sorted((*self.keep, *self.create)))


def deletion_order(pods: Sequence[ObservedPod], current_hash: str) -> list[ObservedPod]:
    """``pods`` in the order they go (see the module docstring); ties by name."""

    def key(pod: ObservedPod) -> tuple[bool, bool, bool, str, str]:
        current = pod.pod_hash == current_hash
        return (pod.ready, pod.scheduled, current, _inverted(pod.created), pod.name)

    return sorted(pods, key=key)


def _inverted(text: str) -> str:
    # RFC 3339 times in UTC sort as text; each character mapped to its complement sorts the
    # later time first.
    return "".join(chr(0x10FFFF - ord(char)) for char in text)


def decide_pods(
    observed: Sequence[ObservedPod],
    *,
    current_hash: str,
    replicas: int,
    surge: int,
    name_for: Callable[[int], str],
) -> PodDecision:
    """The Pod plan (module docstring). ``name_for(slot)`` names a new current Pod."""
    finished = [p for p in observed if p.finished and not p.terminating]
    live = deletion_order(
        [p for p in observed if not p.terminating and not p.finished], current_hash
    )
    out_of_date = [p for p in live if p.pod_hash != current_hash]
    ready = sum(p.ready for p in live)
    wanted = replicas + (surge if out_of_date else 0)
    deleted: dict[str, ObservedPod] = {pod.name: pod for pod in finished}
    creations = max(wanted - len(live), 0)
    for pod in live[: max(len(live) - wanted, 0)]:
        deleted[pod.name] = pod
    recreated = 0
    for pod in out_of_date:
        if pod.name in deleted:
            continue
        if pod.ready and ready != wanted:
            continue
        deleted[pod.name] = pod
        if recreated < len(out_of_date) - surge:
            creations += 1
            recreated += 1
        if pod.ready:
            break  # one Ready Pod per step
    taken = {p.name for p in observed}
    names: list[str] = []
    slot = 0
    while len(names) < creations:
        name = name_for(slot)
        if name not in taken:
            names.append(name)
        slot += 1
    keep = tuple(p.name for p in live if p.pod_hash == current_hash and p.name not in deleted)
    return PodDecision(
        keep=keep,
        create=tuple(names),
        delete=tuple(deleted.values()),
        out_of_date=len(out_of_date),
    )
