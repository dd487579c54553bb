"""Documented differences between dra-affinity and upstream (the allow-list).

Each entry names a class of findings and why our implementation differs from
upstream today. The differential suites fail on findings that no entry
explains AND on entries that explain no finding: when a difference is fixed,
its entry must be removed (or narrowed), so this file always lists exactly the
differences that still exist. Entries are tried in order; the first match wins,
so the feature-gap entries (which name the constructs we lack) come before
the semantic ones.
"""

from __future__ import annotations

import re

from differential import Finding, Known

OUTCOMES = frozenset({
    "outcome:compile->value", "outcome:compile->runtime", "outcome:compile->cost",
    "outcome:value->compile", "outcome:runtime->compile", "outcome:cost->compile",
    "outcome:value->runtime", "outcome:runtime->value", "outcome:value->cost",
    "outcome:cost->value", "outcome:runtime->cost", "outcome:cost->runtime",
})
ANY = OUTCOMES | {"value", "type", "cost", "estimate.min", "estimate.max"}
ESTIMATE = frozenset({"estimate.min", "estimate.max"})


def _upstream_message(pattern: str) -> object:
    rx = re.compile(pattern)

    def where(f: Finding) -> bool:
        return bool(rx.search(f.attrs["upstream"].message))

    return where


def _ours_message(pattern: str) -> object:
    rx = re.compile(pattern)

    def where(f: Finding) -> bool:
        return bool(rx.search(f.attrs["ours"].message))

    return where


def _costs(pred: object) -> object:
    def where(f: Finding) -> bool:
        o, u = f.attrs["ours"].cost, f.attrs["upstream"].cost
        return o is not None and u is not None and bool(pred(o, u))  # type: ignore[operator]

    return where


def _max_estimates(pred: object) -> object:
    def where(f: Finding) -> bool:
        o, u = f.attrs["ours"].estimate, f.attrs["upstream"].estimate
        return o is not None and u is not None and bool(pred(o, u))  # type: ignore[operator]

    return where


CEL_KNOWN: list[Known] = [
    # ---------------------------------------------------------------- feature gaps
    Known(
        "optional types",
        "Kubernetes enables cel.OptionalTypes() since 1.28 (`object.?f`, `[?x]`, `{?k: v}`, "
        "`optional.of/none/ofNonZeroValue`, `.orValue/.or/.hasValue/.value`). Our parser and "
        "library have none of it: every such expression is a compile error for us.",
        ANY,
        subject=r"\.\?|\[\?|\{\?|, \?|\boptional\.",
    ),
    Known(
        "two-variable comprehensions",
        "cel-go's two-variable comprehensions (`all/exists/exists_one(i, v, ...)`, "
        "`transformList`, `transformMap`, `transformMapEntry`; ext.TwoVarComprehensions, "
        "in the Kubernetes environment since 1.33) are not implemented: compile error for us.",
        ANY,
        subject=r"\.(all|exists|exists_one)\(\w+, \w+, |\.transform(List|Map|MapEntry)\(",
    ),
    # ------------------------------------------------------------ compile-time checks
    Known(
        "cel.bind in device selectors",
        "The DRA selector environment adds ext.Bindings (`cel.bind(v, init, expr)`, since "
        "1.31); our selector environment does not know `cel`: compile error for us.",
        ANY,
        families=frozenset({"device"}),
        subject=r"\bcel\.bind\(",
    ),
    Known(
        "selector result type checked at compile time",
        "Upstream rejects a selector whose static type is neither bool nor dyn when compiling "
        "('must evaluate to bool or the unknown type'); our environment compiles it and the "
        "scheduler rejects the non-bool result at evaluation.",
        OUTCOMES,
        families=frozenset({"device"}),
        where=_upstream_message(r"must evaluate to bool"),
    ),
    Known(
        "has() on a map with non-string keys",
        "`has({1: 'a'}.f)`: cel-go type-checks the field test against a map of any key type "
        "(answering false); our checker rejects field selection on map(int, V).",
        OUTCOMES,
        where=_ours_message(r"does not support field selection"),
    ),
    Known(
        "constant folding at program instantiation",
        "Kubernetes builds programs with cel.OptOptimize: constant subexpressions are "
        "evaluated when the program is built, so an error there (e.g. `uint(-1)`, "
        "`double('x')`, `double('1e400')` (we answer +Inf), `string(b'\\xff')`, even in an "
        "untaken branch) fails compilation "
        "('program instantiation failed') where we fail at runtime or not at all.",
        OUTCOMES,
        where=_upstream_message(r"^program instantiation failed"),
    ),
    Known(
        "homogeneous aggregate literals",
        "The Kubernetes base environment sets cel.HomogeneousAggregateLiterals(): list and "
        "map literals whose elements (or keys/values) have different static types are "
        "compile errors ('expected type X but found Y'). We accept them.",
        OUTCOMES,
        where=_upstream_message(r"expected type '[^']+' but found '[^']+'"),
    ),
    Known(
        "mixed-type numeric equality at compile time",
        "With static types int/uint/double on both sides, cel-go has no `==`/`!=` "
        "overload across numeric types (only the ordering operators are cross-type, via "
        "CrossTypeNumericComparisons): a compile error. We compare the values.",
        OUTCOMES,
        where=_upstream_message(r"no matching overload for '_[!=]=_' applied to "
                                r"'\((int|uint|double), (int|uint|double)\)'"),
    ),
    Known(
        "static overload resolution",
        "cel-go rejects a call when no overload matches the static argument types "
        "(e.g. `['a'].sum()`, `quantity('1').sign()`, ternaries with unrelated branch types, "
        "`list(string).indexOf(int)`); our checker lets some through (decided at runtime, "
        "or, for `sign()` on quantities, a function upstream does not have).",
        OUTCOMES,
        where=_upstream_message(r"found no matching overload for"),
    ),
    Known(
        "int literal range",
        "`--9223372036854775808`: cel-go's parser rejects the literal 9223372036854775808 "
        "once the minus sign does not belong to it; we parse it and overflow at runtime.",
        OUTCOMES,
        where=_upstream_message(r"invalid int literal"),
    ),
    # ------------------------------------------------------------ runtime semantics
    Known(
        "repeated keys in map literals",
        "cel-go (with OptOptimize folding constant maps) keeps the last value of a repeated "
        "key in a map literal; we raise 'map literal has repeated key'.",
        OUTCOMES,
        where=_ours_message(r"map literal has repeated key"),
    ),
    Known(
        "has() on a non-map value",
        "`has(x.f)` where `x` is a string/number from dyn data: cel-go answers false, "
        "we raise 'invalid type for has() field test'.",
        OUTCOMES,
        where=_ours_message(r"for has\(\) field test"),
    ),
    # ----------------------------------------------------------------------- cost
    Known(
        "runtime cost: library work charged (deliberate)",
        "We charge work Kubernetes leaves uncharged (docs/decisions.md, 'CEL libraries'): "
        "`isURL`/`url` pay 1 per %-escape besides 0.1 per character (Kubernetes: 1 and 0.1 per "
        "character), `getQuery()` pays for the map it builds, `containsIP`/`containsCIDR` always pay the parse of a string "
        "argument (Kubernetes only when its static type is string), `format` pays 0.1 per "
        "character of its result.",
        frozenset({"cost"}),
        subject=r"\b(isURL|url)\(object|\.getQuery\(|\.contains(IP|CIDR)\(object|\.format\(",
        where=_costs(lambda o, u: o > u),
    ),
    Known(
        "runtime cost: constant folding",
        "Upstream's runtime cost is lower: OptOptimize precomputes constant subexpressions "
        "(literals, conversions of literals, constant list/map literals cost 0 at runtime); "
        "we charge them on every evaluation.",
        frozenset({"cost"}),
        where=_costs(lambda o, u: u < o),
    ),
    Known(
        "runtime cost: upstream charges more",
        "Upstream charges more than we do for: error-absorbing `||`/`&&` (both operands are "
        "charged), semver parsing with pre-release/build parts, and some library calls.",
        frozenset({"cost"}),
        where=_costs(lambda o, u: u > o),
    ),
    Known(
        "estimate: unbounded sizes upstream",
        "With `object` declared dyn and no size estimator, cel-go assumes unbounded sizes "
        "(max cost near 2^64, or 0.1 x 2^64 for traversals) for dyn data and for results of "
        "library functions without a size estimate; we bound data by "
        "OPAQUE_PARAMETERS_MAX_LENGTH (10 KiB) and estimate results.",
        ESTIMATE,
        where=_max_estimates(lambda o, u: u[1] >= 2**60),
    ),
    Known(
        "estimate: different per-node costs",
        "Our static estimate model differs from cel-go's checker: we charge 1 more for "
        "reading a variable (`object.f` is 2 for us, 1 upstream), for negations of literals, "
        "and different amounts for comprehensions and library calls; and our `min` means "
        "'every data-derived size zero' while cel-go's min is its short-circuit lower bound.",
        ESTIMATE,
    ),
]


def _tagged(*tags: str) -> object:
    def where(f: Finding) -> bool:
        return all(t in f.attrs["tags"] for t in tags)

    return where


ALLOCATE_KINDS = frozenset({
    "outcome:allocated->unschedulable", "outcome:allocated->error",
    "outcome:unschedulable->allocated", "outcome:unschedulable->error",
    "outcome:error->allocated", "outcome:error->unschedulable",
    "outcome:rejected->allocated", "outcome:rejected->unschedulable", "outcome:rejected->error",
    "devices", "capacity",
})




ALLOCATE_KNOWN: list[Known] = [
    Known(
        "selectors failing on another driver's device: evaluation order",
        "A request selector that reads `device.attributes['<domain>'].<name>` without has() "
        "fails at runtime on a device of another driver (both sides: the unknown domain is an "
        "empty map, the attribute is missing). Upstream stops evaluating once the request is "
        "satisfied and visits devices in its own order, so it may allocate before reaching "
        "such a device where ours reaches it first (and reports the error).",
        frozenset({"outcome:error->allocated"}),
        where=_tagged("unguarded-selector"),
    ),
    Known(
        "allocationMode All on an incomplete pool",
        "A request with allocationMode All on a node where a pool is incomplete: upstream "
        "1.37 returns a plain error ('asks for all devices, but resource pool ... is "
        "currently being updated'), so the whole attempt fails; ours fails the node with the "
        "same message (Unschedulable), as upstream does since kubernetes#141898 "
        "(kubernetes#141829). Upstream also checks the pools in map order before evaluating "
        "selectors, so when a selector fails at runtime on another pool's device which of "
        "the two errors comes first differs.",
        frozenset({"outcome:unschedulable->error", "outcome:error->unschedulable"}),
        where=_tagged("incomplete", "mode.All"),
    ),
    Known(
        "selectors on devices of incomplete pools",
        "Upstream skips an incomplete pool before evaluating any selector on its devices; ours "
        "evaluates the class and request selectors first (so a device of another class is "
        "reported as a selector mismatch), so a selector failing at runtime on a device of an "
        "incomplete pool is an error for us where upstream allocates from elsewhere.",
        frozenset({"outcome:error->allocated", "outcome:error->unschedulable"}),
        where=_tagged("incomplete"),
    ),
    Known(
        "allocationMode All and claim constraints",
        "When a device of 'all' fails a claim constraint (matchAttribute, distinctAttribute), "
        "upstream 1.37 returns an error ('cannot add device ... because a claim constraint "
        "would not be satisfied') that fails the attempt; ours fails the node (Unschedulable), "
        "or, for a firstAvailable subrequest, tries the next subrequest (and may allocate).",
        frozenset({"outcome:unschedulable->error", "outcome:allocated->error"}),
        where=_upstream_message(r"because a claim constraint would not be satisfied"),
    ),
    Known(
        "allocationMode All evaluates selectors up front",
        "Upstream evaluates the selectors of every allocationMode All request on every device "
        "of the node before the search starts, so a selector failing at runtime there is an "
        "error even when an earlier claim already cannot be allocated; ours evaluates a "
        "request's selectors when the search reaches it, and reports the earlier failure "
        "(Unschedulable).",
        frozenset({"outcome:unschedulable->error"}),
        where=lambda f: "mode.All" in f.attrs["tags"] and bool(
            re.search(r"CEL runtime error", f.attrs["upstream"].message)),
    ),
]
