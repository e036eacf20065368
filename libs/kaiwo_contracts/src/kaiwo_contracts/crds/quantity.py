"""Resource quantities in Kubernetes' own grammar (``resource.Quantity``), never negative.

The grammar is the one ``k8s.io/apimachinery/pkg/api/resource`` parses::

    quantity        ::= [ "+" ] number [ suffix ]
    number          ::= digits | digits "." [ digits ] | "." digits
    suffix          ::= binarySI | decimalSI | decimalExponent
    binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
    decimalSI       ::= n | u | m | k | M | G | T | P | E
    decimalExponent ::= ( "e" | "E" ) [ "+" | "-" ] digits

Kubernetes also allows a leading ``-``; every quantity in these APIs is a size or an amount,
where a negative value means nothing, so the sign is refused here and in the CRD pattern.
Kubernetes silently caps a magnitude beyond ``2**63 - 1``; the models refuse it instead (a
``1e100`` disk is a typo, not a request), so the planner never does arithmetic on it. The CRD
pattern cannot bound a magnitude, so such a value reaches the planner, which reports it as an
invalid spec (condition ``Valid=False`` and a Warning Event).
"""

from __future__ import annotations

import re
from decimal import Context, Decimal
from typing import Annotated, Final

from pydantic import AfterValidator, Field, StrictInt
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import INT_OR_STRING

QUANTITY_PATTERN: Final = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$"
)
"""Kubernetes' quantity grammar without the minus sign (the CRD ``pattern``)."""

MAX_QUANTITY: Final = 2**63 - 1
"""The largest magnitude a Kubernetes quantity holds (beyond it, Kubernetes caps the value)."""

MAX_QUANTITY_TEXT_LENGTH: Final = 64
"""No valid quantity of at most :data:`MAX_QUANTITY` needs more characters than this."""

QUANTITY_MESSAGE: Final = (
    "must be a non-negative Kubernetes quantity such as 500m, 16Gi, 100G or 8 (digits with an "
    "optional decimal point, then one of the suffixes n u m k M G T P E Ki Mi Gi Ti Pi Ei or "
    "an exponent e3), got {value}"
)

_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL: Final = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_COMPILED: Final = re.compile(QUANTITY_PATTERN)
_EXPONENT_LIMIT: Final = 10**6
# Enough precision and range for any exponent the pattern lets through, so no signal fires.
_ARITHMETIC: Final = Context(prec=60, Emax=10 * _EXPONENT_LIMIT, Emin=-10 * _EXPONENT_LIMIT)


def quantity_value(text: str) -> Decimal | None:
    """The value of ``text`` (``"1.5Gi"`` -> 1610612736), None when it is not a quantity."""
    if len(text) > MAX_QUANTITY_TEXT_LENGTH or _COMPILED.fullmatch(text) is None:
        return None
    number = re.match(r"\+?[0-9.]+", text)
    assert number is not None  # the pattern starts with one
    digits, suffix = number.group(0).lstrip("+"), text[number.end() :]
    value = Decimal(digits)
    if suffix in _BINARY:
        return _ARITHMETIC.multiply(value, Decimal(2) ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return _ARITHMETIC.scaleb(value, _DECIMAL[suffix])
    if suffix:
        exponent = int(suffix[1:])
        if abs(exponent) > _EXPONENT_LIMIT:
            return Decimal("Infinity") if exponent > 0 else Decimal(0)
        return _ARITHMETIC.scaleb(value, exponent)
    return value


def _problem(value: object) -> PydanticCustomError:
    return PydanticCustomError("quantity", QUANTITY_MESSAGE, {"value": repr(value)})


def _too_large(value: object) -> PydanticCustomError:
    return PydanticCustomError(
        "quantity_too_large",
        "must be at most 9223372036854775807 (2**63 - 1, the largest Kubernetes quantity), "
        "got {value}",
        {"value": repr(value)},
    )


def check_quantity(value: int | str) -> int | str:
    """``value`` unchanged when it is a non-negative quantity within range (else an error)."""
    if isinstance(value, int):
        if value < 0:
            raise _problem(value)
        if value > MAX_QUANTITY:
            raise _too_large(value)
        return value
    magnitude = quantity_value(value)
    if magnitude is None:
        raise _problem(value)
    if magnitude > MAX_QUANTITY:
        raise _too_large(value)
    return value


_SCHEMA: Final = {INT_OR_STRING: True, "pattern": QUANTITY_PATTERN, "minimum": 0}

Quantity = Annotated[
    StrictInt | str, AfterValidator(check_quantity), Field(json_schema_extra=_SCHEMA)
]
"""A non-negative quantity, ``"16Gi"``, ``"500m"``, ``"8"`` or ``8``, kept exactly as given.

An integer stays an integer and a string stays a string (``"8"`` is not turned into ``8``), so
``cpu: "8"`` round-trips unchanged. ``StrictInt`` also keeps ``true`` from passing as ``1``.
"""

QuantityString = Annotated[
    str,
    AfterValidator(check_quantity),
    Field(json_schema_extra={"pattern": QUANTITY_PATTERN, "maxLength": MAX_QUANTITY_TEXT_LENGTH}),
]
"""A quantity typed as a string in the API (``storageSize: 100Gi``, ``headPodMemory: 16Gi``)."""
