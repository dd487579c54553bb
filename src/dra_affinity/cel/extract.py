"""The KEP-5981 extractor evaluation contract, as a pure function.

:func:`extract` evaluates every extractor against every in-scope opaque
config (configs in the given order; for each config, the extractors in the
given order) and classifies the outcome:

1. A ResourceSlice authoring error stops evaluation at once and is returned
   (the first in evaluation order): ``CEL_ERROR`` for a runtime error,
   ``MISSING_FIELD`` for selecting an absent map key, ``NON_STRING`` for a
   result that is not a string (null, bool, int, list, map...),
   ``COST_EXCEEDED`` when the budget runs out. An extractor that does not
   compile is ``CEL_ERROR`` too (checked before anything is evaluated).
2. Otherwise, a ResourceClaim authoring error (the claim's data is at fault;
   see :attr:`OutcomeKind.is_claim_error`): ``VALUE_TOO_LONG`` for a value
   longer than ``MAX_AFFINITY_VALUE_LENGTH`` UTF-8 bytes (the first in
   evaluation order), then ``SELF_INCONSISTENT`` for two non-empty values for
   one key.
3. Otherwise, an extractor with no non-empty value: ``NO_KEYS``.
4. Otherwise ``OK`` with the merged key map.

``""`` means "this extractor does not apply to this config" and contributes
nothing; the same value from several configs is fine.

Budget: one runtime budget per extraction, that is per request and pool: all
extractors evaluated against all in-scope configs share ``budget`` (by default
SharingAffinityCELMaxCost). So what one scheduling attempt spends on a request
is bounded by the budget however many configs (up to 32) the claim carries;
the static rule at admission caps what one config's evaluation may cost.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from dra_affinity.api.resource import SHARING_AFFINITY_CEL_MAX_COST

from .env import EXTRACTOR_ENV, Environment, Program
from .errors import MISSING_FIELD, CELCompileError, CELCostExceeded, CELEvalError
from .values import type_name

MAX_AFFINITY_VALUE_LENGTH: Final = 256
"""Longest sharing-affinity value, in UTF-8 bytes (see docs/decisions.md).

A value is an identifier (a subnet ID, a partition key, a DNS name of at most
253 bytes); it is kept in every locked device's state, compared on every
scheduling attempt and printed in messages.
"""


class OutcomeKind(enum.Enum):
    """How an extraction ended.

    ``VALUE_TOO_LONG``: an extractor returned a non-empty string longer than
    ``MAX_AFFINITY_VALUE_LENGTH`` UTF-8 bytes. The value comes from the
    claim's opaque config (the extractor idiom returns a config field as
    is), so it is a ResourceClaim authoring error, like ``SELF_INCONSISTENT``:
    the Pod is UnschedulableAndUnresolvable until the claim changes, and no
    device of the pool is viable for it; no slice the driver publishes can fix
    it, and one claim must not abort scheduling as a slice error would.
    """

    OK = "OK"
    NO_KEYS = "NoKeys"
    SELF_INCONSISTENT = "SelfInconsistent"
    VALUE_TOO_LONG = "ValueTooLong"
    CEL_ERROR = "CELError"
    MISSING_FIELD = "MissingField"
    NON_STRING = "NonString"
    COST_EXCEEDED = "CostExceeded"

    @property
    def is_slice_error(self) -> bool:
        """A ResourceSlice authoring error (the slice's CEL is at fault)."""
        return self in _SLICE_ERRORS

    @property
    def is_claim_error(self) -> bool:
        """A ResourceClaim authoring error (the claim's configs are at fault)."""
        return self in _CLAIM_ERRORS


_SLICE_ERRORS = frozenset(
    {
        OutcomeKind.CEL_ERROR,
        OutcomeKind.MISSING_FIELD,
        OutcomeKind.NON_STRING,
        OutcomeKind.COST_EXCEEDED,
    }
)
_CLAIM_ERRORS = frozenset({OutcomeKind.SELF_INCONSISTENT, OutcomeKind.VALUE_TOO_LONG})


@dataclass(frozen=True)
class Extractor:
    """One sharingAffinity entry: an affinity key name and its CEL expression."""

    name: str
    expression: str


@dataclass(frozen=True)
class ConfigObject:
    """An opaque config's decoded parameters and a label naming where it came from."""

    source: str
    parameters: object


@dataclass(frozen=True)
class ExtractionResult:
    kind: OutcomeKind
    keys: tuple[tuple[str, str], ...]  # sorted by key; meaningful for OK
    message: str
    extractor: str | None  # key name of the offending extractor, if any
    source: str | None  # config source of the offending evaluation, if any
    evaluations: int  # (extractor, config) CEL evaluations performed
    cost: int  # total runtime cost

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.OK

    def as_dict(self) -> dict[str, str]:
        """The extracted key map."""
        return dict(self.keys)


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def extract(
    extractors: Sequence[Extractor],
    configs: Sequence[ConfigObject],
    *,
    env: Environment = EXTRACTOR_ENV,
    budget: int = SHARING_AFFINITY_CEL_MAX_COST,
) -> ExtractionResult:
    """Run the extractors over the configs and classify the outcome (see module doc)."""
    programs: list[Program] = []
    for ex in extractors:
        try:
            programs.append(env.compile(ex.expression))
        except CELCompileError as e:
            return ExtractionResult(
                OutcomeKind.CEL_ERROR,
                (),
                f"extractor {ex.name!r}: expression does not compile: {e}",
                ex.name,
                None,
                0,
                0,
            )

    evaluations = 0
    total_cost = 0
    # key -> (value, source) of the first non-empty contribution
    found: dict[str, tuple[str, str]] = {}
    conflict: tuple[str, str, str, str, str] | None = None  # key, v1, src1, v2, src2
    too_long: ExtractionResult | None = None

    def fail(kind: OutcomeKind, message: str, ex: Extractor, cfg: ConfigObject) -> ExtractionResult:
        return ExtractionResult(kind, (), message, ex.name, cfg.source, evaluations, total_cost)

    remaining = budget  # shared by every extractor over every config
    for cfg in configs:
        activation = {"object": cfg.parameters}
        for ex, prog in zip(extractors, programs, strict=True):
            evaluations += 1
            try:
                value, cost = prog.evaluate(activation, remaining)
            except CELCostExceeded as e:
                total_cost += e.cost
                return fail(
                    OutcomeKind.COST_EXCEEDED,
                    f"extractor {ex.name!r} on {cfg.source}: CEL cost budget exhausted "
                    f"(cost {e.cost} > {remaining} remaining of {budget} for this request's configs)",
                    ex,
                    cfg,
                )
            except CELEvalError as e:
                total_cost += e.cost
                kind = (
                    OutcomeKind.MISSING_FIELD
                    if e.reason == MISSING_FIELD
                    else OutcomeKind.CEL_ERROR
                )
                return fail(kind, f"extractor {ex.name!r} on {cfg.source}: {e}", ex, cfg)
            total_cost += cost
            remaining -= cost
            if type(value) is not str and not isinstance(value, str):
                return fail(
                    OutcomeKind.NON_STRING,
                    f"extractor {ex.name!r} on {cfg.source}: returned {type_name(value)} "
                    f"{_short(value)}, want string",
                    ex,
                    cfg,
                )
            if value == "":
                continue
            if len(value) > MAX_AFFINITY_VALUE_LENGTH // 4 and too_long is None:
                size = len(value.encode("utf-8", "surrogatepass"))
                if size > MAX_AFFINITY_VALUE_LENGTH:
                    too_long = fail(
                        OutcomeKind.VALUE_TOO_LONG,
                        f"extractor {ex.name!r} on {cfg.source}: value of {size} bytes "
                        f"{_short(value, 40)} is longer than {MAX_AFFINITY_VALUE_LENGTH} bytes",
                        ex,
                        cfg,
                    )
                    continue
            prev = found.get(ex.name)
            if prev is None:
                found[ex.name] = (str(value), cfg.source)
            elif prev[0] != value and conflict is None:
                conflict = (ex.name, prev[0], prev[1], str(value), cfg.source)

    if too_long is not None:
        return ExtractionResult(
            too_long.kind, (), too_long.message, too_long.extractor, too_long.source,
            evaluations, total_cost,
        )
    if conflict is not None:
        key, v1, s1, v2, s2 = conflict
        return ExtractionResult(
            OutcomeKind.SELF_INCONSISTENT,
            (),
            f"self-inconsistent claim: key {key!r} is {v1!r} from {s1} but {v2!r} from {s2}",
            key,
            s2,
            evaluations,
            total_cost,
        )
    missing = [ex.name for ex in extractors if ex.name not in found]
    if missing:
        names = ", ".join(repr(n) for n in dict.fromkeys(missing))
        where = f"{len(configs)} in-scope config(s)" if configs else "no in-scope configs"
        return ExtractionResult(
            OutcomeKind.NO_KEYS,
            (),
            f"no value for affinity key(s) {names} from {where}",
            missing[0],
            None,
            evaluations,
            total_cost,
        )
    keys = tuple(sorted((k, v) for k, (v, _src) in found.items()))
    return ExtractionResult(
        OutcomeKind.OK,
        keys,
        "extracted "
        + (", ".join(f"{k}={v}" for k, v in keys) if keys else "no keys (no extractors)"),
        None,
        None,
        evaluations,
        total_cost,
    )


def object_fields(expressions: Sequence[str], var: str = "object") -> tuple[str, ...] | None:
    """The top-level fields of ``var`` that the expressions can read, sorted; None when
    they may look at more of it than named fields.

    ``var`` is bound to a plain map and read lazily, so an expression that only ever
    selects ``var.f``, tests ``has(var.f)`` or indexes ``var["f"]`` with a literal
    depends on nothing but those fields' values (or absence). Any other use of the
    variable (passed whole to a function or macro, compared, indexed by a computed
    key, shadowed by a macro variable) gives None. Unparsable text gives None too.
    """
    fields: set[str] = set()
    for text in expressions:
        found = _fields_read(text, var)
        if found is None:
            return None
        fields |= found
    return tuple(sorted(fields))


@functools.lru_cache(maxsize=4096)
def _fields_read(text: str, var: str) -> frozenset[str] | None:
    """One expression's part of :func:`object_fields` (cached: parsing a 10 KiB
    expression is the costly part, and a pool's extractors are analysed again
    whenever a new extractor set appears)."""
    from .ast import Comprehension, Const, Expr, Ident, Index, Select, children
    from .parser import parse

    fields: set[str] = set()
    try:
        stack: list[Expr] = [parse(text)]
    except (CELCompileError, RecursionError):
        return None
    while stack:
        e = stack.pop()
        if isinstance(e, Ident):
            if e.name == var:
                return None  # the variable itself, not one of its fields
            continue
        if isinstance(e, Select) and isinstance(e.operand, Ident) and e.operand.name == var:
            fields.add(e.field)
            continue
        if (isinstance(e, Index) and isinstance(e.operand, Ident) and e.operand.name == var
                and isinstance(e.index, Const) and type(e.index.value) is str):
            fields.add(e.index.value)
            continue
        if isinstance(e, Comprehension) and var in (e.var, e.var2):
            return None
        stack.extend(children(e))
    return frozenset(fields)
