"""Quantity (Kubernetes resource.Quantity) and Semver."""

from __future__ import annotations

import itertools
import pickle
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dra_affinity.cel import EXTRACTOR_ENV, Quantity, Semver

# (text, canonical string as Kubernetes prints it, exact value)
CANONICAL: list[tuple[str, str, Fraction]] = [
    ("16", "16", Fraction(16)),
    ("0", "0", Fraction(0)),
    ("1Gi", "1Gi", Fraction(2**30)),
    ("1024Mi", "1Gi", Fraction(2**30)),
    ("1536Mi", "1536Mi", Fraction(1536 * 2**20)),
    ("1.5Gi", "1536Mi", Fraction(1536 * 2**20)),
    ("0.5Gi", "512Mi", Fraction(2**29)),
    ("1.5Ki", "1536", Fraction(1536)),
    ("1023Ki", "1023Ki", Fraction(1023 * 1024)),
    ("1Ki", "1Ki", Fraction(1024)),
    ("0.1Ki", "102400m", Fraction(1024, 10)),
    ("500m", "500m", Fraction(1, 2)),
    ("0.5", "500m", Fraction(1, 2)),
    ("0.1", "100m", Fraction(1, 10)),
    ("1.0", "1", Fraction(1)),
    ("1000", "1k", Fraction(1000)),
    ("1500", "1500", Fraction(1500)),
    ("1.5k", "1500", Fraction(1500)),
    ("1000m", "1", Fraction(1)),
    ("1500m", "1500m", Fraction(3, 2)),
    ("5000k", "5M", Fraction(5 * 10**6)),
    ("1n", "1n", Fraction(1, 10**9)),
    ("1u", "1u", Fraction(1, 10**6)),
    ("0.0000000001", "1n", Fraction(1, 10**9)),  # rounded up to the smallest amount
    ("-0.0000000001", "-1n", Fraction(-1, 10**9)),  # away from zero
    ("1E", "1E", Fraction(10**18)),
    ("1000E", "1000E", Fraction(10**21)),
    ("1e3", "1e3", Fraction(1000)),
    ("1E3", "1e3", Fraction(1000)),
    ("12e6", "12e6", Fraction(12 * 10**6)),
    ("1.5e3", "1500", Fraction(1500)),
    ("1e-3", "1e-3", Fraction(1, 1000)),
    ("1e-20", "1e-9", Fraction(1, 10**9)),
    ("-1Gi", "-1Gi", Fraction(-(2**30))),
    ("-1.5", "-1500m", Fraction(-3, 2)),
    ("+5", "5", Fraction(5)),
    ("07", "7", Fraction(7)),
    (".5", "500m", Fraction(1, 2)),
    ("5.", "5", Fraction(5)),
    ("10Ei", "9223372036854775807", Fraction(2**63 - 1)),  # binary SI is capped at 2^63-1
    # apimachinery reads a missing number as zero
    ("Mi", "0", Fraction(0)),
    (".", "0", Fraction(0)),
    ("-", "0", Fraction(0)),
]


@pytest.mark.parametrize(("text", "canonical", "value"), CANONICAL)
def test_parse_and_canonical_form(text: str, canonical: str, value: Fraction) -> None:
    q = Quantity.parse(text)
    assert str(q) == canonical
    assert q.value == value
    # the canonical form parses back to the same value
    assert Quantity.parse(str(q)) == q


INVALID = ["", " 1", "1 ", "1 Gi", "1gi", "1K", "200K", "abc", "Three", "1.2.3", "1Ki2", "--1", "1e", "0x10",
           "1e1.5", "1,3G", "1m3", "1Gi1", "1" * 500]


@pytest.mark.parametrize("text", INVALID)
def test_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        Quantity.parse(text)


def test_comparison_table() -> None:
    ordered = ["-1Gi", "-1", "0", "1n", "1m", "999m", "1", "1000m", "1k", "1Ki", "1M", "1Mi", "1G", "1Gi"]
    qs = [Quantity.parse(t) for t in ordered]
    for a, b in itertools.pairwise(qs):
        assert a <= b
    assert Quantity.parse("1") == Quantity.parse("1000m")
    assert Quantity.parse("1k") == Quantity.parse("1000") == Quantity.parse("1e3")
    assert Quantity.parse("1Ki") > Quantity.parse("1k")
    assert Quantity.parse("50M") < Quantity.parse("50Mi")
    assert Quantity.parse("200M").compare(Quantity.parse("0.2G")) == 0
    assert hash(Quantity.parse("1k")) == hash(Quantity.parse("1000"))
    assert len({Quantity.parse("1Gi"), Quantity.parse("1024Mi"), Quantity.parse("1073741824")}) == 1


def test_arithmetic() -> None:
    a = Quantity.parse("1Gi")
    b = Quantity.parse("512Mi")
    assert str(a + b) == "1536Mi"
    assert str(a - b) == "512Mi"
    assert str(b - a) == "-512Mi"
    assert str(Quantity.parse("100m") + Quantity.parse("200m")) == "300m"  # exact, unlike floats
    assert Quantity.parse("0.1") + Quantity.parse("0.2") == Quantity.parse("0.3")
    assert str(Quantity.parse("16") - 4) == "12"
    assert str(Quantity.parse("0") + Quantity.parse("1Gi")) == "1Gi"  # a zero receiver takes the operand's format
    assert str(Quantity.parse("2Gi") * 3) == "6Gi"
    assert sum([Quantity.parse("1"), Quantity.parse("2")], Quantity.parse("0")) == Quantity.parse("3")
    assert -Quantity.parse("1k") == Quantity.parse("-1k")


def test_conversions() -> None:
    assert Quantity.parse("50k").as_int() == 50000
    assert Quantity.parse("50k").is_integer()
    assert not Quantity.parse("500m").is_integer()
    with pytest.raises(ValueError, match="cannot convert"):
        Quantity.parse("500m").as_int()
    assert not Quantity.parse("9999999999999999999999999999999999999G").is_integer()
    assert Quantity.parse("1.5").as_approximate_float() == 1.5
    assert Quantity.parse("1.5").ceil_int() == 2
    assert Quantity.parse("1.5").milli_value() == 1500
    assert Quantity.parse("-1.5").ceil_int() == -1
    assert Quantity.parse("-3").sign() == -1
    assert Quantity.from_int(5) == Quantity.parse("5")
    assert Quantity.from_milli(1500) == Quantity.parse("1.5")
    assert not Quantity.parse("0")
    assert Quantity.parse("1n")


def test_immutable_and_picklable() -> None:
    q = Quantity.parse("1Gi")
    with pytest.raises(AttributeError):
        q._nanos = 1  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(q)) == q
    assert str(pickle.loads(pickle.dumps(q))) == "1Gi"
    assert repr(q) == "Quantity('1Gi')"


@given(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-2", "n"]),
)
def test_canonical_round_trip(n: int, suffix: str) -> None:
    q = Quantity.parse(f"{n}{suffix}")
    again = Quantity.parse(str(q))
    assert again == q
    assert str(again) == str(q)


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=999))
def test_decimal_values_are_exact(whole: int, frac: int) -> None:
    q = Quantity.parse(f"{whole}.{frac:03d}")
    assert q.value == Fraction(whole * 1000 + frac, 1000)


# -- Semver -----------------------------------------------------------------------


def test_semver_precedence() -> None:
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0", "10.0.0"]
    versions = [Semver.parse(v) for v in chain]
    for a, b in itertools.pairwise(versions):
        assert a < b
        assert a.compare(b) == -1
        assert b.compare(a) == 1


def test_semver_fields_and_build_metadata() -> None:
    v = Semver.parse("1.2.3-rc.1+build.5")
    assert (v.major, v.minor, v.patch, v.pre, v.build) == (1, 2, 3, ("rc", 1), ("build", "5"))
    assert str(v) == "1.2.3-rc.1+build.5"
    assert Semver.parse("1.2.3+a") == Semver.parse("1.2.3+b")
    assert hash(Semver.parse("1.2.3+a")) == hash(Semver.parse("1.2.3"))


@pytest.mark.parametrize(
    "text", ["", "1", "1.2", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "1.2.3-01", "1.2.3+", "1.2.3-a..b",
             "1.2.3-a_b", "a.b.c", "1.2.3.4", " 1.2.3"]
)
def test_semver_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid semver"):
        Semver.parse(text)
    assert not Semver.is_valid(text)


@pytest.mark.parametrize(
    ("text", "normalized"), [("v1.2.3", "1.2.3"), ("1.0", "1.0.0"), ("1", "1.0.0"), ("01.01.01", "1.1.1"), ("v2", "2.0.0")]
)
def test_semver_normalize(text: str, normalized: str) -> None:
    assert str(Semver.parse(text, normalize=True)) == normalized


def test_semver_normalize_rejects_short_prerelease() -> None:
    with pytest.raises(ValueError, match="short version"):
        Semver.parse("1.0-rc1", normalize=True)


# -- one type for the API and CEL, with Kubernetes' parse bounds ----------------


def test_api_and_cel_share_one_quantity_type() -> None:
    from dra_affinity.api.quantity import Quantity as ApiQuantity
    from dra_affinity.cel import Quantity as CelQuantity

    assert ApiQuantity is CelQuantity
    assert ApiQuantity.parse("1.5Gi") == CelQuantity.parse("1536Mi")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the exponent is read as an int64, then truncated to int32 as Go's int32() does
        ("1e9223372036854775807", "100e-3"),  # int64 max -> int32 -1
        ("1e4294967296", "1"),  # 2**32 -> 0
        ("1e2147483648", "1e-9"),  # 2**31 -> -2**31: rounds up to 1n
        ("1e-9223372036854775808", "1"),  # int64 min -> int32 0
        ("1e999", "1e999"),  # just below the magnitude bound
        ("0.5e1000", "5e999"),
        ("1" * 400, "1" * 400),  # at the digit bound
    ],
)
def test_quantity_bounds_at_the_limit(text: str, expected: str) -> None:
    assert str(Quantity.parse(text)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e9223372036854775808", "unable to parse quantity's suffix"),  # int64 max + 1
        ("1e-9223372036854775809", "unable to parse quantity's suffix"),  # int64 min - 1
        ("1e1000", "value too large"),  # at 10**1000
        ("0.5e1001", "value too large"),
        ("0.00001e1005", "value too large"),
        ("1" * 401, "more than 400 digits"),
        ("1.5 ", "quantities must match"),  # no trimming in the parser (CEL's quantity())
    ],
)
def test_quantity_bounds_just_past_the_limit(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Quantity.parse(text)


def test_quantity_huge_exponent_is_refused_without_materializing() -> None:
    # 10**2147483647 would take gigabytes; the magnitude is checked first.
    with pytest.raises(ValueError, match="value too large"):
        Quantity.parse("0.5e2147483647")


def test_api_construction_rounds_to_nano_and_keeps_num() -> None:
    from fractions import Fraction

    from dra_affinity.api.quantity import q

    assert Quantity(Fraction(1, 3)).value == Fraction(333333334, 10**9)
    assert Quantity(-Fraction(1, 3)).value == -Fraction(333333334, 10**9)
    assert Quantity(5).num == 5 and type(Quantity(5).num) is int
    assert Quantity.parse("500m").num == Fraction(1, 2)
    assert q(" 1Gi ") == Quantity.parse("1Gi")  # the API decoder trims space
    assert Quantity.parse(3) == Quantity.parse("3")
    assert Quantity.parse(0.25) == Quantity.parse("250m")
    with pytest.raises(ValueError, match="finite"):
        Quantity.parse(float("nan"))
    with pytest.raises(TypeError):
        Quantity("1")  # type: ignore[arg-type]
    assert Quantity.parse("1Gi").as_integer() == 2**30
    assert Quantity.parse("1m").as_integer() is None


def test_api_model_validation_uses_the_shared_type() -> None:
    import pydantic

    class M(pydantic.BaseModel):
        q: Quantity

    assert M.model_validate({"q": " 2Gi"}).q == Quantity.parse("2Gi")
    assert M.model_validate({"q": "2048Mi"}).model_dump() == {"q": "2Gi"}
    with pytest.raises(pydantic.ValidationError, match="value too large"):
        M.model_validate({"q": "1e1000"})


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # Kubernetes' Quantity.Sub negates the int64 amount, and -MinInt64 wraps to
        # MinInt64: while the int64 sum fits, the operand is added instead
        ("quantity('0.2G').sub(-9223372036854775808)", "-9223372036654775808"),
        ("quantity('1').sub(-9223372036854775808)", "-9223372036854775807"),
        ("quantity('0').sub(-9223372036854775808)", "-9223372036854775808"),
        # the int64 sum overflows: the exact decimal path subtracts correctly
        ("quantity('-1').sub(-9223372036854775808)", "9223372036854775807"),
        ("quantity('1.5').sub(-9223372036854775808)", "9223372036854775809500m"),
    ],
)
def test_cel_sub_of_min_int64_as_kubernetes(expr: str, expected: str) -> None:
    assert str(EXTRACTOR_ENV.compile(expr).evaluate({"object": None}, 10**6)[0]) == expected
