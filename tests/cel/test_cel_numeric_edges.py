"""Numbers of different kinds compared at the 64-bit edges, as cel-go compares them.

cel-go converts the int (or uint) to a double to compare it with a double, so
2**63-1 equals the double 2**63; a NaN cannot be ordered; a constant list is a
hashed set whose members convert to the other kinds only where that is exact.
"""

from __future__ import annotations

import pytest

from dra_affinity.cel import EXTRACTOR_ENV, CELEvalError


def run(expression: str, obj: object = None) -> object:
    return EXTRACTOR_ENV.compile(expression).evaluate({"object": obj}, 10_000)[0]


@pytest.mark.parametrize(("expression", "want"), [
    ("9223372036854775807 < 9223372036854775808.0", False),
    ("9223372036854775807 >= 9223372036854775808.0", True),
    ("9223372036854775808.0 > 9223372036854775807", False),
    ("18446744073709551615u < 18446744073709551616.0", False),
    ("9007199254740993 > 9007199254740992.0", False),
    ("dyn(9223372036854775807) == 9223372036854775808.0", True),
    ("dyn(18446744073709551615u) == 18446744073709551616.0", True),
    ("dyn(9007199254740993) != 9007199254740992.0", False),
    ("[dyn(9223372036854775807)] == [dyn(9223372036854775808.0)]", True),
    ("{'k': dyn(9223372036854775807)} == {'k': dyn(9223372036854775808.0)}", True),
    ("9223372036854775807 < 9223372036854775807u", False),  # int against uint: exact
    ("-1 < 0u", True),
    ("dyn(9223372036854775807) in [9223372036854775808.0]", False),  # a hashed set: exact
    ("dyn(9223372036854775808.0) in [9223372036854775807]", True),  # the int as a double
    ("dyn(1.0) in [1, 2]", True),
    ("dyn(-9223372036854775808.0) in [1u]", False),
    ("[dyn(1.0), dyn(double('NaN'))].isSorted()", True),
])
def test_mixed_kinds_compare_as_cel_go(expression: str, want: bool) -> None:
    assert run(expression) is want


def test_object_integer_against_a_double_rounds_as_cel_go() -> None:
    assert run("object.n == 9223372036854775808.0", {"n": 2**63 - 1}) is True
    assert run("object.n < 9223372036854775808.0", {"n": 2**63 - 1}) is False


@pytest.mark.parametrize("expression", ["1.0 < double('NaN')", "1 < double('NaN')",
                                        "double('NaN') >= 1u", "dyn(double('NaN')) > dyn(1)"])
def test_nan_cannot_be_ordered(expression: str) -> None:
    with pytest.raises(CELEvalError, match="NaN values cannot be ordered"):
        run(expression)


@pytest.mark.parametrize("expression", ["{}[?object.l]", "{'a': 1}[object.l]", "{}[object.m]"])
def test_map_index_by_a_list_or_map_is_an_invalid_qualifier(expression: str) -> None:
    with pytest.raises(CELEvalError, match="invalid qualifier type"):
        run(expression, {"l": [1], "m": {}})
