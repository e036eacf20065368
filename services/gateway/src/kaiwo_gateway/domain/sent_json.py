"""A request's JSON forwarded as its client wrote it, with one member's value replaced.

The gateway names a LoRA adapter's model by the adapter's name for the model server
(``alpha_sql`` becomes ``sql``), and the messenger takes the OpenAI request out of its
message. Parsing the body and encoding it again changed what the client sent: a number past
a double's range (``1e400``) became ``Infinity``, which is no JSON and which the model
server read as infinite; a decimal with more digits than a double keeps lost them; of a key
given twice only the last was kept (decision 0262). So the body is forwarded as sent:
:func:`member_spans` finds where each top-level member's value is in the text, and
:func:`with_member` puts the new value there, leaving every other character alone.

Called only on a body ``json.loads`` already took (within the body limits, decision 0041):
the values are scanned with the same parser, so what it accepted is found the same way.
"""

from __future__ import annotations

import json
from json.decoder import WHITESPACE, JSONDecodeError, JSONDecoder, scanstring  # type: ignore[attr-defined]
from typing import Final

_DECODER: Final = JSONDecoder()


def _skip_whitespace(text: str, index: int) -> int:
    end: int = WHITESPACE.match(text, index).end()
    return end


def member_spans(text: str, key: str, start: int = 0) -> list[tuple[int, int]]:
    """Where the value of each member ``key`` of the object at ``start`` is in ``text``
    (start, end), in order; JSONDecodeError when no object is there."""
    index = _skip_whitespace(text, start)
    if text[index : index + 1] != "{":
        raise JSONDecodeError("expected an object", text, index)
    index = _skip_whitespace(text, index + 1)
    spans: list[tuple[int, int]] = []
    if text[index : index + 1] == "}":
        return spans
    while True:
        if text[index : index + 1] != '"':
            raise JSONDecodeError("expected a member's name", text, index)
        name, index = scanstring(text, index + 1)
        index = _skip_whitespace(text, index)
        if text[index : index + 1] != ":":
            raise JSONDecodeError("expected ':'", text, index)
        value_start = _skip_whitespace(text, index + 1)
        _value, value_end = _DECODER.raw_decode(text, value_start)
        if name == key:
            spans.append((value_start, value_end))
        index = _skip_whitespace(text, value_end)
        if text[index : index + 1] == ",":
            index = _skip_whitespace(text, index + 1)
            continue
        if text[index : index + 1] == "}":
            return spans
        raise JSONDecodeError("expected ',' or '}'", text, index)


def sent_text(raw: bytes) -> str:
    """The body's text, in the encoding ``json.loads`` found for it (UTF-8, -16 or -32)."""
    return raw.decode(json.detect_encoding(raw))


def with_member(raw: bytes, key: str, value: str) -> bytes:
    """The JSON object ``raw`` with every top-level member ``key`` set to the string
    ``value`` (a model server may read the first or the last of a key given twice), the rest
    as sent; in UTF-8, which JSON between systems is (RFC 8259), a byte-order mark dropped."""
    text = sent_text(raw)
    replacement = json.dumps(value)
    for start, end in reversed(member_spans(text, key)):
        text = text[:start] + replacement + text[end:]
    return text.encode()


def member_text(raw: bytes, key: str) -> bytes:
    """The value of the top-level member ``key`` of the JSON object ``raw`` as sent (the last
    one, the one ``json.loads`` keeps), in UTF-8; KeyError when there is none."""
    text = sent_text(raw)
    spans = member_spans(text, key)
    if not spans:
        raise KeyError(key)
    start, end = spans[-1]
    return text[start:end].encode()
