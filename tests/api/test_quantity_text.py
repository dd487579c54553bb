"""A quantity's text is remembered by value and format: the same text as working it out,
for every value, and the memory of texts stays bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dra_affinity.api import quantity as qmod
from dra_affinity.api.quantity import Quantity

_FORMATS = st.sampled_from(["BinarySI", "DecimalSI", "DecimalExponent"])


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=-(10**30), max_value=10**30), _FORMATS)
def test_the_remembered_text_is_the_worked_out_text(nanos: int, fmt: str) -> None:
    q = Quantity.from_nanos(nanos, fmt)  # type: ignore[arg-type]
    assert str(q) == q._text()
    assert str(q) == q._text()  # again, now from memory


def test_one_value_in_two_formats_keeps_two_texts() -> None:
    assert str(Quantity.parse("1Ki")) == "1Ki"
    assert str(Quantity.parse("1024")) == "1024"
    assert str(Quantity.parse("1k")) == "1k"
    assert str(Quantity.parse("1e3")) == "1e3"


def test_the_memory_of_texts_is_bounded() -> None:
    for i in range(qmod._TEXTS_MAX + 10):
        q = Quantity.from_nanos(i)
        assert str(q) == q._text()
        assert len(qmod._TEXTS) <= qmod._TEXTS_MAX
