"""Which event-store stream a recorded message belongs to (pure).

The rule, in order:

1. **Dead letters** (``kaiwo.dlq.<stream>.<consumer>``) and the server's max-deliveries
   advisories (``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>``) go to
   ``deadletter/<stream>/<consumer>``: one stream per consumer that gave up on messages.
2. **Anything about a workload** goes to ``workload/<correlationid>``. The correlation id is
   the uid of the owner object (KaiwoJob, KaiwoService, Model, ...), so the workload's own
   observations, the observations of its children (Jobs, Pods, Kueue Workloads, ...), its
   plans, the executor's results and the monitor's findings all land in one stream, in the
   order they were recorded. A namespaced object nobody owns is its own workload.
3. **Cluster-scoped objects that belong to no workload** (Node, KaiwoConfig,
   KaiwoQueueConfig, Namespace, ...; the correlation id is then the object's own uid) go to
   ``<kind>/<name>``, with the lowercase kind of the subject: ``node/gpu-node-1``,
   ``kaiwoqueueconfig/kaiwo``. People ask about these by name; a node re-created under the
   same name continues its stream (each event still carries the uid). ``<kind>/<uid>`` is
   used when a message carries no name (no ``ce-subject``).
4. A subject that is none of ours goes to ``unrouted/<nats stream>``.

Streams are therefore per *workload*, not per object: ``kaiwo events explain`` reads one
stream to tell a workload's whole story. Order inside a stream is the order of recording,
which across NATS streams (observations vs plans vs results) is not causal order; the
causation ids and the NATS stream sequences in the metadata are what order them.
"""

from __future__ import annotations

import functools

from kaiwo_contracts.events.streams import MAX_DELIVERIES_ADVISORY
from kaiwo_contracts.events.subjects import Family, ParsedSubject, SubjectError, parse_subject

WORKLOAD_PREFIX = "workload/"
DEAD_LETTER_PREFIX = "deadletter/"
UNROUTED_PREFIX = "unrouted/"


def workload_stream(correlation_id: str) -> str:
    """``workload/<correlationid>``: the stream of everything about one workload."""
    return f"{WORKLOAD_PREFIX}{correlation_id}"


def dead_letter_stream(*, stream: str, consumer: str) -> str:
    return f"{DEAD_LETTER_PREFIX}{stream}/{consumer}"


def advisory_origin(subject: str) -> tuple[str, str] | None:
    """(stream, consumer) of a max-deliveries advisory subject, else None."""
    prefix = MAX_DELIVERIES_ADVISORY + "."
    if not subject.startswith(prefix):
        return None
    stream, _, consumer = subject[len(prefix) :].partition(".")
    return (stream, consumer) if stream and consumer else None


@functools.lru_cache(maxsize=16_384)
def parsed_or_none(subject: str) -> ParsedSubject | None:
    """The parsed subject, or None; cached: every version of an object has one subject."""
    try:
        return parse_subject(subject)
    except SubjectError:
        return None


def stream_id_for(
    *, nats_subject: str, nats_stream: str, correlation_id: str, name: str | None
) -> str:
    """The stream of a message (see the module docstring for the rule).

    ``name`` is the object's name when the message says it (the CloudEvents ``subject`` of a
    cluster-scoped object is its name).
    """
    advisory = advisory_origin(nats_subject)
    if advisory is not None:
        return dead_letter_stream(stream=advisory[0], consumer=advisory[1])
    parsed = parsed_or_none(nats_subject)
    if parsed is None:
        return f"{UNROUTED_PREFIX}{nats_stream}"
    if parsed.family is Family.DEAD_LETTER:
        return dead_letter_stream(stream=str(parsed.stream), consumer=str(parsed.consumer))
    belongs_to_itself = parsed.uid is not None and parsed.uid == correlation_id
    kind = parsed.kind or (parsed.family.value if parsed.family is Family.GATEWAY else None)
    if not (parsed.cluster_scoped and belongs_to_itself and kind):
        return workload_stream(correlation_id)
    return f"{kind}/{name or parsed.uid}"
