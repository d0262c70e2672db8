"""Kubernetes resource quantities ("500m", "8Gi", "1e3") as exact decimals.

The grammar is apimachinery's: a signed decimal number, then a binary SI suffix
(Ki..Ei), a decimal SI suffix (n, u, m, k, M, G, T, P, E) or a decimal exponent
(e3, E-2). "1E" is an exabyte and "1E3" a thousand, as in the API server.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)
GIB = Decimal(1024**3)


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity as an exact Decimal in base units (cores, bytes, devices).

    Raises ValueError for anything the API server would reject.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    try:
        number = Decimal(match["number"])
    except InvalidOperation:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None
    if match["exponent"]:
        return number.scaleb(int(match["exponent"][1:]))
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * (1024 ** _BINARY[suffix])
    return number.scaleb(_DECIMAL[suffix])


def canonical(value: str | int | float) -> str:
    """A string equal for equal quantities ("1" and "1000m", "1Gi" and "1073741824")."""
    number = parse_quantity(value).normalize()
    return format(number, "f")


def cores(value: Decimal) -> str:
    """CPU for people: "24", "1.5"."""
    return format(value.normalize(), "f")


def gib(value: Decimal) -> str:
    """Memory for people, in GiB: "64Gi", "1.5Gi"."""
    amount = (value / GIB).quantize(Decimal("0.1")).normalize()
    return f"{format(amount, 'f')}Gi"
