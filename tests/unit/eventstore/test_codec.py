"""The stored form of data and metadata: deflated JSON with a frozen preset dictionary."""

from __future__ import annotations

import hashlib
import json
import zlib

import pytest
from kaiwo_eventstore.codec import (
    DICTIONARY_V1,
    FORMAT_DEFLATE_V1,
    DocumentFormatError,
    decode_document,
    decode_document_json,
    encode_document,
)

OBSERVATION = {
    "kind": "Pod",
    "apiVersion": "v1",
    "namespace": "ml-team",
    "name": "train-7-0",
    "uid": "kaiwojob-7-pod",
    "resourceVersion": "1234",
    "eventType": "MODIFIED",
    "object": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-7-0",
            "namespace": "ml-team",
            "uid": "kaiwojob-7-pod",
            "labels": {"kaiwo.silogen.ai/run-id": "kaiwojob-7", "job-name": "train-7"},
            "ownerReferences": [{"uid": "kaiwojob-7-job", "kind": "Job"}],
        },
        "spec": {"nodeName": "mi300x-7"},
        "status": {"phase": "Running"},
    },
}


def test_the_v1_dictionary_never_changes() -> None:
    # Every row written in format 1 needs exactly these bytes to be read back: a change
    # here makes stored events unreadable. A better dictionary is a new format byte.
    assert hashlib.sha256(DICTIONARY_V1).hexdigest() == (
        "105bb339b0b214af7eb9c953fc42918ea600c6059264604a7c3e3234e1323586"
    )


@pytest.mark.parametrize(
    "document",
    [
        OBSERVATION,
        {},
        {"text": 'ä ✓ \u2028 "quoted" \\\\ \n', "none": None, "big": 2**62, "ratio": 0.1},
        {"list": [[], {}, [1, [2, [3]]]], "bool": False},
    ],
)
def test_documents_round_trip(document: dict[str, object]) -> None:
    stored = encode_document(document)

    assert stored[0] == FORMAT_DEFLATE_V1
    assert decode_document(stored) == document


def test_each_document_is_the_bytes_a_new_compressor_writes_alone() -> None:
    """Every document is compressed by a copy of one primed compressor: its bytes are those
    of a compressor made for it alone, whatever was compressed before it."""
    documents = [OBSERVATION, {"small": 1}, {**OBSERVATION, "name": "train-8-0"}, {}]

    def alone(document: object) -> bytes:
        deflate = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=DICTIONARY_V1)
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        return bytes((FORMAT_DEFLATE_V1,)) + deflate.compress(text) + deflate.flush()

    assert [encode_document(d) for d in documents] == [alone(d) for d in documents]
    assert encode_document(OBSERVATION) == alone(OBSERVATION)  # once more, after the others


def test_the_dictionary_makes_a_small_observation_a_fraction_of_its_json() -> None:
    as_json = json.dumps(OBSERVATION, separators=(",", ":")).encode()
    assert len(as_json) == 452
    # Deflate without the dictionary has not seen the keys yet: 241 bytes.
    assert len(zlib.compress(as_json, 6)) > 200
    assert len(encode_document(OBSERVATION)) < 452 / 3


def test_the_json_text_is_available_without_parsing() -> None:
    assert decode_document_json(encode_document({"a": [1, 2]})) == b'{"a":[1,2]}'


@pytest.mark.parametrize(
    ("stored", "named"),
    [(b"", "no bytes"), (b"\x02abc", "format byte 2"), (b"\x01not deflate", "does not inflate")],
)
def test_bytes_in_no_known_format_are_refused_with_the_reason(stored: bytes, named: str) -> None:
    with pytest.raises(DocumentFormatError, match=named):
        decode_document(stored)
