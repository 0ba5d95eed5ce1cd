from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from muster.api.quantity import Quantity, QuantityError, parse_quantity, to_int, to_milli


@pytest.mark.parametrize(
    ("text", "value", "canonical"),
    [
        ("500m", Fraction(1, 2), "500m"),
        ("2", 2, "2"),
        ("1.5", Fraction(3, 2), "1500m"),
        ("16Gi", 16 * 2**30, "16Gi"),
        ("1024Mi", 2**30, "1Gi"),
        ("1536Mi", 1536 * 2**20, "1536Mi"),
        ("0.5Gi", 2**29, "512Mi"),
        ("1e3", 1000, "1e3"),
        ("1E3", 1000, "1e3"),
        ("1k", 1000, "1k"),
        ("2000", 2000, "2k"),
        ("100n", Fraction(1, 10**7), "100n"),
        ("-2", -2, "-2"),
        (".5", Fraction(1, 2), "500m"),
        ("0", 0, "0"),
        ("1000Ki", 1024000, "1000Ki"),
    ],
)
def test_parse_and_canonical_format(text, value, canonical):
    q = parse_quantity(text)
    assert q.value == value
    assert str(q) == canonical
    assert parse_quantity(str(q)) == q


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 Gi", "1Gb", "--1", "1ee3", "Gi", "1KI", "nan"])
def test_rejects_non_quantities_with_a_hint(bad):
    with pytest.raises(QuantityError, match="Kubernetes quantity"):
        parse_quantity(bad)


def test_numbers_are_accepted():
    assert parse_quantity(2) == parse_quantity("2")
    assert parse_quantity(0.25) == parse_quantity("250m")
    with pytest.raises(QuantityError):
        parse_quantity(True)
    with pytest.raises(QuantityError):
        parse_quantity(float("inf"))


def test_compare_and_add():
    assert parse_quantity("500m") < parse_quantity("1")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("1k") == parse_quantity("1e3") == 1000
    total = parse_quantity("500m") + parse_quantity("1500m")
    assert total == 2 and str(total) == "2"
    assert str(parse_quantity("1Gi") + parse_quantity("512Mi")) == "1536Mi"
    assert sum([parse_quantity("1"), parse_quantity("2")], Quantity(0)) == 3
    assert parse_quantity("3") - "1" == 2


def test_milli_and_int_round_up():
    assert to_milli("500m") == 500
    assert to_milli("1n") == 1
    assert to_milli("2") == 2000
    assert to_int("16Gi") == 16 * 2**30
    assert to_int("1500m") == 2


_suffix = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e3", "e-3", "e6", "n", "u"])


@given(st.integers(min_value=0, max_value=10**9), _suffix)
def test_round_trip_integers_with_suffixes(n, suffix):
    q = parse_quantity(f"{n}{suffix}")
    assert parse_quantity(str(q)) == q
    assert str(parse_quantity(str(q))) == str(q)


@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False))
def test_round_trip_decimals(d):
    q = parse_quantity(str(d))
    assert q.value == Fraction(str(d))
    assert parse_quantity(str(q)) == q


@given(
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=0, max_value=10**12),
)
def test_addition_matches_milli_arithmetic(a, b):
    qa, qb = parse_quantity(f"{a}m"), parse_quantity(f"{b}m")
    assert (qa + qb).milli() == a + b
    assert (qa < qb) == (a < b)
