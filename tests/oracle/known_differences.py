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
    # ------------------------------------------------------------ compile-time checks
    Known(
        "static overload resolution",
        "cel-go rejects a call when no overload matches the static argument types; ours "
        "still lets through: `sets.*` on lists of different element types (ext.Sets), "
        "`quantity.sign()` (a function upstream's quantity library does not declare), and "
        "a `dyn` receiver resolved by upstream to its only overload (e.g. `reverse()` as a "
        "list). Kubernetes lists functions, list `+`, equality, `in`, indexing and ternaries "
        "are checked as cel-go does.",
        OUTCOMES,
        where=_upstream_message(r"found no matching overload for|expected type '\w+' but found 'dyn'"),
    ),
    Known(
        "maps and lists as map keys",
        "cel-go builds maps with list or map keys: a `dyn` key in a map literal "
        "(`{object.tags: 1}`) or a map key added by `transformMapEntry` "
        "(`{'a': {'b': 1}}.transformMapEntry(k, v, {v: k})`); such a map cannot be indexed "
        "by that key and is not even equal to itself. CEL map keys are int, uint, bool or "
        "string: our checker rejects a list- or map-typed key at compile time and the "
        "interpreter a `dyn` key holding a list, map or null at run time.",
        frozenset({"outcome:compile->value", "outcome:compile->runtime",
                   "outcome:runtime->value"}),
        where=_ours_message(r"unsupported map key type: (map|list|null_type)"),
    ),
    Known(
        "regular expressions: compiling a large program is charged (deliberate)",
        "Go counts a character class as one instruction; RE2 expands it into UTF-8 byte "
        "ranges (`\\pL` is about 1,200), so `\\pL{999}` is a program of 1.2 million "
        "instructions, seconds to compile. Its compile is charged by that size (docs/cel.md, "
        "'Regular expressions'; docs/decisions.md), so such a pattern, valid in Go, exceeds "
        "the cost limit where cel-go (which does not charge compiles) evaluates it.",
        frozenset({"outcome:cost->value", "outcome:cost->runtime"}),
        subject=r"\\p[LN]\{\d{3}|\\pL\|\\pN\)\{\d{3}",
        where=_ours_message(r"actual cost limit exceeded"),
    ),
    # ------------------------------------------------------------ runtime semantics
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
        "runtime cost: we charge more",
        "Where our runtime cost is higher, on purpose (each bounds Python work the budget "
        "would not otherwise see): `x in list` costs the list's size (cel-go: 1; constant "
        "lists of scalars are hashed and free, as upstream); `findAll` charges 10 per match; "
        "strings built by `+`, `split`, `replace`, `join` cost at least 0.1 per byte of "
        "memory; list `+` charges the copy; nested equality charges inner elements; "
        "`semver`/`isSemver` pay per character and identifier, `timestamp`/`duration` 2 per "
        "character, version comparisons per "
        "pre-release identifier; traversed elements (`max()` of short strings) at least 1 "
        "each; `flatten` half a unit per element gained; a regex match by the larger of "
        "the pattern's length and its instruction count, and a pattern not compiled with "
        "the expression its check and compile (docs/decisions.md, 'CEL libraries'). And "
        "cel-go's conditional attributes (`c ? object.a : x` folded into one attribute) "
        "skip a selection charge we make.",
        frozenset({"cost"}),
        where=_costs(lambda o, u: u < o),
    ),
    Known(
        "runtime cost: upstream charges more",
        "Upstream charges more than we do for: error-absorbing `||`/`&&` (both operands are "
        "charged), semver parsing with pre-release/build parts, some library calls, and a "
        "selection or index on a value that is not a variable (`[1, 2][0]`, `{'k': 1}.k`, "
        "`f(x)[?i]`: a 'relative attribute', 1 for the attribute plus 1 per qualifier upstream, "
        "1 per qualifier for us).",
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
        "Our static estimate is an upper bound of our runtime cost, node by node; cel-go's "
        "checker is not one of its own runtime cost: it charges an attribute chain "
        "(`object.a.b`) 1 where its runtime charges 1 per qualifier, so aligning with it "
        "would let evaluations exceed the estimate that admission relies on. Ours also "
        "charges constant literals that both runtimes get for free (as cel-go's estimator "
        "does), and our `min` means 'every data-derived size zero' while cel-go's min is its "
        "short-circuit lower bound. See docs/cel.md, Static estimate.",
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


# ============================================================== placement
PLACEMENT_KNOWN: list[Known] = []
