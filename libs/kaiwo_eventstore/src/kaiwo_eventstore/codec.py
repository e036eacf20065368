"""How an event's ``data`` and ``metadata`` are kept on disk: compact JSON, deflated.

Two thirds of a store were whole observed objects, each version of an object stored in full
as JSON text (PostgreSQL compresses nothing under 2 KB, SQLite never). A document is now
stored as one byte naming its format, then the format's bytes:

* ``0x01``: compact JSON (pydantic-core), raw deflate (zlib level 6) with the preset
  dictionary :data:`DICTIONARY_V1`. Small documents compress badly on their own, since
  deflate has not yet seen the keys they repeat; the dictionary holds what Kubernetes
  objects, observations, plans and their metadata say over and over, so even a 300-byte
  document compresses from its first byte.

The dictionary is frozen: every row written with format 1 needs exactly these bytes to be
read back (a unit test pins their SHA-256). A better dictionary is format 2, with format 1
still readable.

Pure functions; both SQL adapters call them, the in-memory fake keeps documents as given.
"""

from __future__ import annotations

import zlib
from typing import Any, Final

from pydantic_core import from_json, to_json

FORMAT_DEFLATE_V1: Final = 1
LEVEL: Final = 6
_WBITS: Final = -15  # raw deflate: no zlib header or checksum (6 bytes a row)

# Fragments in the compact form pydantic-core writes, the most frequent last (deflate finds
# matches nearer the end more cheaply). Never edit: see the module docstring.
DICTIONARY_V1: Final = (
    b'"managedFields":[{"manager":"kube-controller-manager","operation":"Update",'
    b'"fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{},'
    b'"subresource":"status"}]'
    b'"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists",'
    b'"effect":"NoExecute","tolerationSeconds":300},'
    b'{"key":"node.kubernetes.io/unreachable","operator":"Exists",'
    b'"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File",'
    b'"imagePullPolicy":"IfNotPresent","restartPolicy":"Never","dnsPolicy":"ClusterFirst",'
    b'"schedulerName":"default-scheduler","securityContext":{},'
    b'"terminationGracePeriodSeconds":30,"serviceAccountName":"default",'
    b'"volumeMounts":[{"name":"kube-api-access-","mountPath":'
    b'"/var/run/secrets/kubernetes.io/serviceaccount","readOnly":true}],'
    b'"nodeSelector":{"kaiwo/nodepool":"'
    b'"capacity":{"cpu":"128","memory":"1Ti","pods":"110","amd.com/gpu":"8"},'
    b'"allocatable":{"cpu":"'
    b'"kubernetes.io/hostname":"'
    b'"amd.com/gpu.product-name":"AMD_Instinct_MI300X_OAM",'
    b'"beta.amd.com/gpu.family.AI":"'
    b'"kueue.x-k8s.io/queue-name":"'
    b'"kueue.x-k8s.io/v1beta1","kind":"Workload"'
    b'"podSets":[{"name":"main","count":1,"template":'
    b'"admission":{"clusterQueue":"kaiwo","podSetAssignments":[{"name":"main",'
    b'"flavors":{"amd.com/gpu":"'
    b'"resourceUsage":{"cpu":"'
    b'"reason":"QuotaReserved","message":"Quota reserved in ClusterQueue kaiwo",'
    b'"reason":"Admitted","message":"The workload is admitted",'
    b'"observedGeneration":1,"lastTransitionTime":"20'
    b'"conditions":[{"type":"Ready","status":"True","lastProbeTime":null,'
    b'"type":"Admitted","status":"True"'
    b'"type":"Complete","status":"True"'
    b'"type":"Failed","status":"False"'
    b'"startTime":"20'
    b'"completionTime":"20'
    b'"phase":"Pending"'
    b'"phase":"Running"'
    b'"phase":"Succeeded"'
    b'"containerStatuses":[{"name":"main","state":{"running":{"startedAt":"20'
    b'"podIP":"10.'
    b'"hostIP":"10.'
    b'"qosClass":"Burstable"'
    b'"uncountedTerminatedPods":{},'
    b'"succeeded":1'
    b'"active":1,"ready":1'
    b'"backoffLimit":0,"completions":1,"parallelism":1,"completionMode":"NonIndexed",'
    b'"suspend":false,"manualSelector":false,"podReplacementPolicy":"TerminatingOrFailed",'
    b'"selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"'
    b'"batch.kubernetes.io/job-name":"'
    b'"controller-uid":"'
    b'"job-name":"'
    b'"apiVersion":"batch/v1","kind":"Job"'
    b'"apiVersion":"v1","kind":"Pod"'
    b'"apiVersion":"v1","kind":"Node"'
    b'"apiVersion":"v1","kind":"PersistentVolumeClaim"'
    b'"apiVersion":"v1","kind":"Service"'
    b'"apiVersion":"apps/v1","kind":"Deployment"'
    b'"apiVersion":"ray.io/v1","kind":"RayJob"'
    b'"apiVersion":"kaiwo.silogen.ai/v1alpha1","kind":"KaiwoService"'
    b'"apiVersion":"kaiwo.silogen.ai/v1alpha1","kind":"KaiwoQueueConfig"'
    b'"apiVersion":"config.kaiwo.silogen.ai/v1alpha1","kind":"KaiwoConfig"'
    b'"ownerReferences":[{"apiVersion":"kaiwo.silogen.ai/v1alpha1","kind":"KaiwoJob",'
    b'"blockOwnerDeletion":true,"controller":true,'
    b'"kaiwo.silogen.ai/managed":"true",'
    b'"kaiwo.silogen.ai/owner-uid":"'
    b'"kaiwo.silogen.ai/run-id":"'
    b'"kaiwo.silogen.ai/user":"'
    b'"kaiwo.silogen.ai/type":"job"'
    b'"app.kubernetes.io/managed-by":"kaiwo"'
    b'"resources":{"requests":{"cpu":"8","memory":"64Gi","amd.com/gpu":"1"},'
    b'"limits":{"cpu":"8","memory":"64Gi","amd.com/gpu":"1"}}'
    b'"image":"ghcr.io/silogen/rocm-ray:'
    b'"command":["sh","-c",'
    b'"entrypoint":"python train.py'
    b'"env":[{"name":"'
    b'"containers":[{"name":"main",'
    b'"template":{"metadata":{"labels":{'
    b'"spec":{"user":"'
    b'"gpus":1,'
    b'"replicas":1,'
    b'"status":"PENDING"'
    b'"status":"RUNNING"'
    b'"status":"COMPLETE"'
    b'"status":"FAILED"'
    b'"plan":{"owner":{"apiVersion":"kaiwo.silogen.ai/v1alpha1","kind":"KaiwoJob",'
    b'"observedGeneration":1,"observedResourceVersion":"'
    b'"desired":[{'
    b'"shared":[],'
    b'"deleteTypes":[],'
    b'"createOnly":false,'
    b'"assumedStatus":null,'
    b'"absent":[],"drifted":[],'
    b'"trigger":"observation",'
    b'"trigger":"resync",'
    b'"trigger":"timer",'
    b'"plannedAt":"20'
    b'"fingerprint":"'
    b'"monSequence":0,"scaleSequence":0,'
    b'"obsSequence":'
    b'"outcome":"applied",'
    b'"eventType":"ADDED",'
    b'"eventType":"MODIFIED",'
    b'"eventType":"DELETED",'
    b'"eventType":"SYNC",'
    b'"oversized":false,'
    b'"creationTimestamp":"20'
    b'"generation":1,'
    b'"resourceVersion":"'
    b'"labels":{'
    b'"annotations":{'
    b'"ownerReferences":[{'
    b'"finalizers":['
    b'"natsStream":"KAIWO_RES","natsSequence":'
    b'"natsStream":"KAIWO_PLAN","natsSequence":'
    b'"natsSubject":"kaiwo.res.'
    b'"natsSubject":"kaiwo.plan.kaiwojob.'
    b'"natsSubject":"kaiwo.obs.job.'
    b'"natsSubject":"kaiwo.obs.pod.'
    b'"natsSubject":"kaiwo.obs.workload.'
    b'"natsSubject":"kaiwo.obs.kaiwojob.'
    b'"traceparent":"00-'
    b'"natsStream":"KAIWO_OBS","natsSequence":'
    b'"namespace":"'
    b'"name":"'
    b'"uid":"'
    b'"kind":"KaiwoJob"'
    b'"apiVersion":"kaiwo.silogen.ai/v1alpha1",'
    b'"object":{"apiVersion":"'
    b'"metadata":{"name":"'
    b'"status":{"conditions":[{"type":"'
    b'"spec":{'
    b'"status":"True"'
    b'"status":"False"'
    b'"type":"'
    b'"reason":"'
    b'"message":"'
)


class DocumentFormatError(ValueError):
    """Stored bytes in no format this version reads (a newer writer, or damage)."""


_PRIMED_V1: Final = zlib.compressobj(LEVEL, zlib.DEFLATED, _WBITS, zdict=DICTIONARY_V1)
"""A compressor that has taken in the dictionary and nothing else; never used itself, only
copied. A copy writes the very bytes a new compressor would, without hashing the dictionary
again for every document (a third of a small document's time, a tenth of a large one's)."""


def encode_document(document: Any) -> bytes:
    """``document`` (JSON-serialisable) as stored: the format byte, then deflated JSON."""
    deflate = _PRIMED_V1.copy()
    return bytes((FORMAT_DEFLATE_V1,)) + deflate.compress(to_json(document)) + deflate.flush()


def decode_document(stored: bytes) -> Any:
    """The document :func:`encode_document` stored."""
    return from_json(decode_document_json(stored))


def decode_document_json(stored: bytes) -> bytes:
    """The stored document's JSON text, not parsed (for a caller that validates JSON itself,
    e.g. pydantic's ``model_validate_json``, which skips building the dicts)."""
    if not stored or stored[0] != FORMAT_DEFLATE_V1:
        found = f"format byte {stored[0]}" if stored else "no bytes"
        # Readers check the store's schema revision first (kaiwo events does): what gets
        # here is a row written outside this version's revisions, or damage.
        msg = f"stored document in an unknown format ({found}): another kaiwo's, or damaged"
        raise DocumentFormatError(msg)
    inflate = zlib.decompressobj(_WBITS, zdict=DICTIONARY_V1)
    try:
        return inflate.decompress(memoryview(stored)[1:]) + inflate.flush()
    except zlib.error as error:
        raise DocumentFormatError(f"stored document does not inflate: {error}") from error
