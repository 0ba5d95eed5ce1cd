"""Kubernetes resource quantities: parse, format, compare and add.

A quantity is kept as an exact rational number (``fractions.Fraction``) plus the format
family it was written in (binary SI ``Ki``, decimal SI ``k``/``m``, or decimal exponent
``e3``), so ``str(parse(s))`` gives Kubernetes' canonical form and round-trips exactly.

The scheduler's hot path does not use this class: it converts requests once to integers
with :func:`to_units` -- :func:`to_milli` for cpu and GPUs, :func:`to_int` for bytes and
counts, rounding up as Kubernetes' ``MilliValue`` and ``Value`` do. It holds them in 64-bit
integers, so validation bounds every quantity to :data:`MAX_UNITS` of those units
(:func:`units_problem`): a thousand of the largest still add up inside 64 bits, and every
amount is exact as a JSON number in any client (2**53 bytes is 8Pi; 2**53 milli-CPU, about
nine trillion cores).
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache, total_ordering

__all__ = [
    "MAX_UNITS",
    "MILLI_RESOURCES",
    "QUANTITY_PATTERN",
    "Format",
    "Quantity",
    "QuantityError",
    "amount_of",
    "fmt_amount",
    "format_units",
    "parse_quantity",
    "to_int",
    "to_milli",
    "to_units",
    "units_problem",
]

MAX_UNITS = 2**53
MILLI_RESOURCES = frozenset({"cpu", "nvidia.com/gpu"})
_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage", "muster.dev/gpu-memory"})
# Parsing is exact arithmetic: these keep a hostile quantity (1e999999999) from costing
# minutes of CPU before the bound above could refuse it.
_MAX_DIGITS = 64
_MAX_EXPONENT = 64


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message says what is allowed."""


class Format(StrEnum):
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"
    DECIMAL_EXPONENT = "DecimalExponent"


_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_BY_POW = {v: k for k, v in _BINARY.items()}

# sign, digits with an optional fraction, then a suffix: binary SI, decimal SI or an exponent.
_RE_TEXT = (
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)
_RE = re.compile(_RE_TEXT)
# The same, for JSON Schema (which has no named groups): the form the OpenAPI document declares.
QUANTITY_PATTERN = re.sub(r"\?P<\w+>", "", _RE_TEXT)

_HINT = "expected a Kubernetes quantity such as 500m, 2, 1.5, 16Gi, 512Mi, 1k or 1e3"


@total_ordering
class Quantity:
    """An exact quantity with the format family it should be printed in."""

    __slots__ = ("_value", "format")

    def __init__(self, value: Fraction | int, fmt: Format = Format.DECIMAL_SI) -> None:
        self._value = Fraction(value)
        self.format = fmt

    @classmethod
    def parse(cls, text: str | int | float | Quantity) -> Quantity:
        """Parse ``text`` (a string, an int or a float) into a quantity.

        Raises :class:`QuantityError` naming the input and the accepted forms.
        """
        if isinstance(text, Quantity):
            return text
        if isinstance(text, bool):
            raise QuantityError(f"{text!r} is not a quantity: {_HINT}")
        if isinstance(text, int):
            return cls(text, Format.DECIMAL_SI)
        if isinstance(text, float):
            if not math.isfinite(text):
                raise QuantityError(f"{text!r} is not a quantity: {_HINT}")
            return cls(Fraction(repr(text)), Format.DECIMAL_SI)
        if not isinstance(text, str):
            raise QuantityError(f"{text!r} is not a quantity: {_HINT}")
        value, fmt = _parse_text(text)
        return cls(value, fmt)

    # -- numeric views ------------------------------------------------------------------

    @property
    def value(self) -> Fraction:
        """The exact value in base units (cores, bytes, devices)."""
        return self._value

    def milli(self) -> int:
        """The value in thousandths, rounded up (Kubernetes' ``MilliValue``)."""
        return math.ceil(self._value * 1000)

    def as_int(self) -> int:
        """The value rounded up to an integer (Kubernetes' ``Value``)."""
        return math.ceil(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def is_zero(self) -> bool:
        return self._value == 0

    # -- arithmetic and comparison ------------------------------------------------------

    def __add__(self, other: object) -> Quantity:
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return Quantity(self._value + o._value, self.format)

    __radd__ = __add__

    def __sub__(self, other: object) -> Quantity:
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return Quantity(self._value - o._value, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self._value, self.format)

    def __mul__(self, k: int | Fraction) -> Quantity:
        return Quantity(self._value * k, self.format)

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        o = _coerce(other)
        return o is not None and self._value == o._value

    def __lt__(self, other: object) -> bool:
        o = _coerce(other)
        if o is None:
            return NotImplemented
        return self._value < o._value

    def __hash__(self) -> int:
        return hash(self._value)

    # -- formatting ---------------------------------------------------------------------

    def __str__(self) -> str:
        return _format(self._value, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def parse_quantity(text: str | int | float | Quantity) -> Quantity:
    """Shorthand for :meth:`Quantity.parse`."""
    return Quantity.parse(text)


def to_milli(text: str | int | float | Quantity) -> int:
    """Parse and return thousandths, rounded up (``500m`` -> 500, ``2`` -> 2000)."""
    if isinstance(text, str):
        return _milli_of_text(text)
    return Quantity.parse(text).milli()


def to_int(text: str | int | float | Quantity) -> int:
    """Parse and return the value rounded up to an integer (``16Gi`` -> 17179869184)."""
    if isinstance(text, str):
        return math.ceil(_parse_text(text)[0])
    return Quantity.parse(text).as_int()


def to_units(resource: str, quantity: str | int | float | Quantity) -> int:
    """A quantity of ``resource`` in the scheduler's integer units: thousandths for cpu and
    GPUs, whole units (bytes, counts) for everything else."""
    return to_milli(quantity) if resource in MILLI_RESOURCES else to_int(quantity)


def format_units(resource: str, value: int) -> str:
    """The inverse of :func:`to_units` for messages: ``format_units("cpu", 1500) == "1500m"``."""
    if resource in MILLI_RESOURCES:
        if value % 1000 == 0:
            return str(value // 1000)
        return str(Quantity(Fraction(value, 1000)))
    fmt = Format.BINARY_SI if resource in _BINARY_RESOURCES else Format.DECIMAL_SI
    return str(Quantity(value, fmt))


def units_problem(quantity: Quantity, resource: str | None = None) -> str | None:
    """Why ``quantity`` is too large for the scheduler, or None: more than :data:`MAX_UNITS`
    units of ``resource`` (whole units when the resource is not known)."""
    units = to_units(resource or "", quantity)
    if abs(units) <= MAX_UNITS:
        return None
    largest = format_units(resource or "", MAX_UNITS)
    return f"must be at most {largest} (the largest amount the scheduler counts)"


def _clip(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:37] + "..."


# The same few quantities ("1", "500m", "16Gi") are parsed again and again by every scheduling
# cycle: remember them (values are immutable).
@lru_cache(maxsize=4096)
def _parse_text(text: str) -> tuple[Fraction, Format]:
    m = _RE.fullmatch(text)  # no surrounding spaces, as Kubernetes
    if not m:
        raise QuantityError(f"{text!r} is not a quantity: {_HINT}")
    if len(m.group("num")) > _MAX_DIGITS:
        raise QuantityError(f"{_clip(text)} is not a quantity: more than {_MAX_DIGITS} digits")
    exponent = (m.group("exp") or "e0")[1:].lstrip("+-").lstrip("0") or "0"
    if len(exponent) > 2 or int(exponent) > _MAX_EXPONENT:
        raise QuantityError(
            f"{_clip(text)} is not a quantity: the exponent must be between -{_MAX_EXPONENT} and "
            f"{_MAX_EXPONENT}"
        )
    value = Fraction(m.group("num"))
    if m.group("sign") == "-":
        value = -value
    if m.group("bin"):
        return value * 1024 ** _BINARY[m.group("bin")], Format.BINARY_SI
    if m.group("exp"):
        return value * Fraction(10) ** int(m.group("exp")[1:]), Format.DECIMAL_EXPONENT
    return value * Fraction(10) ** _DECIMAL[m.group("dec") or ""], Format.DECIMAL_SI


@lru_cache(maxsize=4096)
def _milli_of_text(text: str) -> int:
    return math.ceil(_parse_text(text)[0] * 1000)


def _coerce(other: object) -> Quantity | None:
    if isinstance(other, Quantity):
        return other
    if isinstance(other, (int, float, str)) and not isinstance(other, bool):
        try:
            return Quantity.parse(other)
        except QuantityError:
            return None
    return None


def _format(value: Fraction, fmt: Format) -> str:
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    v = abs(value)
    if fmt is Format.BINARY_SI and v.denominator == 1:
        return sign + _format_binary(v.numerator)
    if fmt is Format.DECIMAL_EXPONENT:
        return sign + _format_decimal(v, exponent=True)
    return sign + _format_decimal(v, exponent=False)


def _format_binary(n: int) -> str:
    # Below 1Ki Kubernetes prints binary quantities as plain decimal integers.
    power = 0
    while power < 6 and n % 1024 == 0 and n >= 1024:
        n //= 1024
        power += 1
    if power == 0:
        return _format_decimal(Fraction(n), exponent=False)
    return f"{n}{_BINARY_BY_POW[power]}"


def _format_decimal(v: Fraction, exponent: bool) -> str:
    # Values finer than a nano unit are rounded up to one, as Kubernetes does.
    nanos = math.ceil(v * 10**9)
    exp = -9
    while exp < 18 and nanos % 1000 == 0:
        nanos //= 1000
        exp += 3
    if exponent:
        return str(nanos) if exp == 0 else f"{nanos}e{exp}"
    return f"{nanos}{_DECIMAL_BY_EXP[exp]}"


# -- amounts for people ----------------------------------------------------------------------

_BINARY_UNITS = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def amount_of(text: object) -> Fraction:
    """A quantity's exact value where a malformed or missing one counts as nothing (views over
    stored objects, which validation already checked, must not fail on one odd field)."""
    if text is None or text == "":
        return Fraction(0)
    try:
        return Quantity.parse(text).value  # type: ignore[arg-type]
    except QuantityError:
        return Fraction(0)


def fmt_amount(resource: str, amount: Fraction | int) -> str:
    """An amount for people: bytes in binary units (``12.5Gi``), everything else as a short
    decimal (``0.5`` GPUs, ``1.25`` CPUs)."""
    value = Fraction(amount)
    if _is_bytes(resource):
        for unit, size in _BINARY_UNITS:
            if abs(value) >= size:
                return f"{_short(value / size)}{unit}"
        return _short(value)
    return _short(value)


def _is_bytes(resource: str) -> bool:
    return resource in ("memory", "ephemeral-storage") or resource.endswith("memory")


def _short(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.2f}".rstrip("0").rstrip(".")
