"""ext.Sets and ext.Lists (version 3) of the Kubernetes CEL environment: values, errors, costs."""

from __future__ import annotations

import pytest
from cel_helpers import ev_cost

from dra_affinity.cel import EXTRACTOR_ENV, CELCompileError, CELCostExceeded, CELEvalError

CASES = [
    # expression, value, runtime cost (cel-go's trackers; constant literal lists are
    # built when compiling and cost nothing at run time)
    ("sets.contains([1, 2, 3], [2])", True, 1 + 3),
    ("sets.contains([1, 2, 3], [2, 4])", False, 1 + 6),
    ("sets.contains([], [])", True, 1),
    ("sets.contains([dyn(1), dyn(2.0)], [2u])", True, 1 + 2),  # CEL numeric equality
    ("sets.equivalent([1, 2], [2, 1, 1])", True, 1 + 2 * 6),
    ("sets.equivalent([1, 2], [1])", False, 1 + 2 * 2),
    ("sets.intersects([1], [2])", False, 1 + 1),
    ("sets.intersects([1, 2], [2])", True, 1 + 2),
    ("[1, 2, 3, 4].slice(1, 3)", [2, 3], 2 + 11),
    ("[1, 2].slice(2, 2)", [], 11),
    ("lists.range(4)", [0, 1, 2, 3], 4 + 11),
    ("lists.range(0)", [], 11),
    ("[1, 2, 3].reverse()", [3, 2, 1], 3 + 11),
    ("[dyn(1), dyn([dyn(2), dyn([3])])].flatten()", [1, 2, [3]], 2 + 11),
    ("[dyn(1), dyn([dyn(2), dyn([3])])].flatten(2)", [1, 2, 3], 4 + 11),
    ("[dyn(1), dyn([dyn(2), dyn([3])])].flatten(0)", [1, [2, [3]]], 11),
    ("[3, 1, 2, 1].distinct()", [3, 1, 2], 32 + 11),
    ("[dyn(1), dyn(1.0), dyn(1u)].distinct()", [1], 18 + 11),
    ("[3, 1, 2].sort()", [1, 2, 3], 18 + 11),
    ('["b", "a"].sort()', ["a", "b"], 8 + 11),  # 2.1 * 4 = 8.4
    ("[].sort()", [], 11),
]


@pytest.mark.parametrize(("expr", "value", "cost"), CASES, ids=[c[0] for c in CASES])
def test_ext_library_values_and_costs(expr: str, value: object, cost: int) -> None:
    got, actual = ev_cost(expr)
    assert got == value
    assert actual == cost
    assert actual <= EXTRACTOR_ENV.compile(expr).cost_estimate.max


ERRORS = [
    ("[1, 2].slice(2, 1)", "start index must be less than or equal to end index"),
    ("[1, 2].slice(-1, 1)", "negative indexes not supported"),
    ("[1, 2].slice(0, 3)", "list is length 2"),
    ("[dyn(1), dyn([2])].flatten(-1)", "level must be non-negative"),
    ('[dyn(1), dyn("a")].sort()', "same type and be comparable"),
    ("[[1], [2]].sort()", "same type and be comparable"),
    ("sets.contains(dyn(1), [1])", "no such overload"),
    ("lists.range(-1)", "size must be non-negative, got -1"),
]


@pytest.mark.parametrize(("expr", "message"), ERRORS, ids=[c[0] for c in ERRORS])
def test_ext_library_errors(expr: str, message: str) -> None:
    with pytest.raises(CELEvalError, match=message):
        ev_cost(expr)


def test_range_is_charged_before_it_is_built() -> None:
    with pytest.raises(CELCostExceeded) as info:
        ev_cost("lists.range(100000000)", budget=1_000_000)
    assert info.value.cost == 100_000_000 + 11


def test_unknown_namespaced_function_is_a_compile_error() -> None:
    with pytest.raises(CELCompileError, match="undeclared reference"):
        EXTRACTOR_ENV.compile("sets.union([1], [2])")


def test_data_driven_range_estimate_is_unbounded_but_min_is_not() -> None:
    est = EXTRACTOR_ENV.compile("lists.range(object.n).size()").cost_estimate
    assert est.min < 100
    assert est.max == 2**63 - 1


# -- sortBy (ext.Lists version 2+) ----------------------------------------------------

SORT_BY = [
    ("['b', 'a', 'c'].sortBy(s, s)", ["a", "b", "c"]),
    ("[3, 1, 2].sortBy(x, -x)", [3, 2, 1]),
    ("[{'k': 2}, {'k': 1}].sortBy(m, m.k)", [{"k": 1}, {"k": 2}]),
    ("['bb', 'a', 'cc'].sortBy(s, s.size())", ["a", "bb", "cc"]),  # equal keys keep their order
    ("[].sortBy(x, x)", []),
    ("(true ? [2, 1] : []).sortBy(x, x)", [1, 2]),
    ("[timestamp(2), timestamp(1)].sortBy(t, t) == [timestamp(1), timestamp(2)]", True),
]


@pytest.mark.parametrize(("expr", "value"), SORT_BY, ids=[c[0] for c in SORT_BY])
def test_sort_by(expr: str, value: object) -> None:
    assert ev_cost(expr)[0] == value


def test_sort_by_cost_is_cel_go_plus_the_second_evaluation_of_the_list() -> None:
    # keys list: the map over the list (cel-go's charge) is 3 + ...; @sortByAssociatedKeys is
    # 2 n^2 + 11; the list expression (object.n, 2) is evaluated twice here, once in cel-go.
    _, cost = ev_cost("object.n.sortBy(x, x)", {"object": {"n": [3, 1, 2]}})
    _, map_cost = ev_cost("object.n.map(x, x)", {"object": {"n": [3, 1, 2]}})
    assert cost == 2 + map_cost + 2 * 9 + 11


@pytest.mark.parametrize("expr", ["object.n.sortBy(x, [x])", "{'a': 1}.sortBy(x, x)", "1.sortBy(x, x)",
                                  "object.n.sortBy(1, x)"])
def test_sort_by_compile_errors(expr: str) -> None:
    with pytest.raises(CELCompileError):
        EXTRACTOR_ENV.compile(expr)


@pytest.mark.parametrize(("obj", "reason"), [({"n": [{"k": 1}, {"k": 2}]}, "invalid_argument"),
                                             ({"n": [1, "a"]}, "invalid_argument"),
                                             ({"n": 5}, "no_such_overload")])
def test_sort_by_runtime_errors(obj: object, reason: str) -> None:
    with pytest.raises(CELEvalError) as info:
        ev_cost("object.n.sortBy(x, x)", {"object": obj})
    assert info.value.reason == reason
