"""Helpers shared by the per-kind validators: names, limits, CEL, opaque config,
node selection and object metadata (see :mod:`.admission` for the conventions)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from dra_affinity import cel
from dra_affinity.api.io import FieldError
from dra_affinity.api.meta import NodeSelector, NodeSelectorRequirement, ObjectMeta
from dra_affinity.api.numbers import INT64_MAX, INT64_MIN
from dra_affinity.api.quantity import Quantity
from dra_affinity.api.resource import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    OPAQUE_PARAMETERS_MAX_LENGTH,
    DeviceSelector,
    OpaqueDeviceConfiguration,
)
from dra_affinity.validation._errors import (
    ROOT,
    Path,
    at,
    c_identifier_problems,
    dns_label_problems,
    dns_subdomain_problems,
    duplicate,
    forbidden,
    invalid,
    label_value_problems,
    nbytes,
    not_supported,
    qualified_label_key_problems,
    required,
    too_long,
    too_many,
)

Errors = list[FieldError]
T = TypeVar("T")

# Limits from k8s.io/api/resource/v1 not (yet) exported by dra_affinity.api.
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
DEVICE_MAX_ID_LENGTH = 32  # the C-identifier part of a qualified attribute name
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH = 64
DEVICE_SELECTORS_MAX = 32
DEVICE_TOLERATIONS_MAX = 16
DEVICE_TAINTS_MAX = 4

_REQUEST_REF_MSG = (
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'"
)
_NODE_SELECTION_FIELDS = "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
_VALUE_OMITTED = "<value omitted>"


# ============================================================== generic helpers
def _unique(
    items: Sequence[T],
    key: Callable[[T], Hashable],
    path: Path,
    child: str | None = None,
    shown: Callable[[T], Any] | None = None,
) -> Errors:
    """``Duplicate value`` for every item whose key was seen earlier in the list."""
    errs: Errors = []
    if len(items) < 2:
        return errs
    seen: set[Hashable] = set()
    for i, item in enumerate(items):
        k = key(item)
        if k in seen:
            where = path.index(i).child(child) if child else path.index(i)
            errs.append(duplicate(where, shown(item) if shown else k))
        seen.add(k)
    return errs


def _max_items(items: Collection[Any], limit: int, path: Path) -> Errors:
    return [too_many(path, len(items), limit)] if len(items) > limit else []


def _int64(value: int, path: Path) -> Errors:
    # Go stores these as int64; a bigger YAML integer would not even decode there.
    if not INT64_MIN <= value <= INT64_MAX:
        return [invalid(path, value, "must fit in a 64-bit signed integer")]
    return []


def _non_negative(value: Quantity, path: Path) -> Errors:
    if value.sign() < 0:
        return [invalid(path, str(value), "must be greater than or equal to 0")]
    return []


def _invalid_each(path: Path, value: Any, problems: tuple[str, ...]) -> Errors:
    """One ``Invalid value`` per problem (called only when there are some: a valid value,
    the common case, makes no list comprehension's frame)."""
    return [invalid(path, value, m) for m in problems]


def _longer(value: str, limit: int) -> bool:
    """``nbytes(value) > limit`` without encoding ASCII (its bytes are its characters)."""
    return len(value) > limit or (not value.isascii() and nbytes(value) > limit)


def _dns_label(value: str, path: Path) -> Errors:
    if not value:
        return [required(path)]
    problems = dns_label_problems(value)
    return _invalid_each(path, value, problems) if problems else []


def _dns_subdomain(value: str, path: Path) -> Errors:
    if not value:
        return [required(path)]
    problems = dns_subdomain_problems(value)
    return _invalid_each(path, value, problems) if problems else []


def _driver_name(name: str, path: Path) -> Errors:
    """A driver name: DNS subdomain of at most 63 bytes (Kubernetes lower-cases first)."""
    if not name:
        return [required(path)]
    errs: Errors = []
    if _longer(name, DRIVER_NAME_MAX_LENGTH):
        errs.append(too_long(path, DRIVER_NAME_MAX_LENGTH))
    problems = dns_subdomain_problems(name.lower())
    if problems:
        errs += _invalid_each(path, name, problems)
    return errs


def _pool_name(name: str, path: Path) -> Errors:
    """Pool names are DNS subdomains joined by ``/`` (at most 253 bytes overall)."""
    if not name:
        return [required(path)]
    errs: Errors = []
    if _longer(name, POOL_NAME_MAX_LENGTH):
        errs.append(too_long(path, POOL_NAME_MAX_LENGTH))
    for part in name.split("/"):
        problems = dns_subdomain_problems(part)
        if problems:
            errs += _invalid_each(path, part, problems)
    return errs


def _c_identifier(name: str, path: Path) -> Errors:
    errs: Errors = []
    if _longer(name, DEVICE_MAX_ID_LENGTH):
        errs.append(too_long(path, DEVICE_MAX_ID_LENGTH))
    problems = c_identifier_problems(name)
    if problems:
        errs += _invalid_each(path, name, problems)
    return errs


def _qualified_name(name: str, path: Path, *, need_domain: bool = False) -> Errors:
    """An attribute / capacity name: ``name`` or ``domain/name``, name a C identifier."""
    if not name:
        return [required(path, "name required")]
    parts = name.split("/")
    if len(parts) == 1:
        if need_domain:
            return [invalid(path, name, "must include a domain")]
        return _c_identifier(parts[0], path)
    if len(parts) == 2:
        domain, ident = parts
        errs: Errors = []
        errs += (
            [required(path, "the domain must not be empty")]
            if not domain
            else _driver_name(domain, path)
        )
        errs += (
            [required(path, "the name must not be empty")]
            if not ident
            else _c_identifier(ident, path)
        )
        return errs
    return [
        invalid(
            path,
            name,
            "must be either a C identifier or a domain followed by a slash and a C identifier",
        )
    ]


def _labels(labels: Mapping[str, str], path: Path) -> Errors:
    errs: Errors = []
    for k, v in labels.items():
        problems = qualified_label_key_problems(k)
        if problems:
            errs += _invalid_each(path, k, problems)
        problems = label_value_problems(v)
        if problems:
            errs += _invalid_each(path, v, problems)
    return errs


# ============================================================== CEL
def _describe_compile_error(err: cel.CELCompileError) -> str:
    """The CEL message; its ``str`` already ends with "(at offset N)" when the position is known."""
    return str(err) or type(err).__name__


def _cel_expression(
    expression: str,
    path: Path,
    env: cel.Environment,
    returns: tuple[str, ...],
) -> tuple[Errors, cel.Program | None]:
    """Length, compilation and result type of one expression; the program if all pass."""
    if not expression:
        return [required(path)], None
    if nbytes(expression) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
        # Too long is not even compiled: the limit exists to bound that work.
        return [too_long(path, CEL_SELECTOR_EXPRESSION_MAX_LENGTH)], None
    try:
        program = env.compile(expression)
    except cel.CELCompileError as e:
        return [
            invalid(path, expression, f"compilation failed: {_describe_compile_error(e)}")
        ], None
    except Exception as e:  # an API server turns a crash into a rejection, not a 500
        return [invalid(path, expression, f"compilation failed: {type(e).__name__}: {e}")], None
    if program.result_type not in (*returns, "dyn"):
        return [
            invalid(path, expression, f"must return {returns[0]}, not {program.result_type}")
        ], None
    return [], program


def _min_cost(expression: str) -> int | None:
    """Data-independent cost of an extractor that is already stored, None if it no longer compiles."""
    try:
        return int(cel.EXTRACTOR_ENV.compile(expression).cost_estimate.min)
    except Exception:  # ratcheted entries are not re-judged; unknown cost counts as 0
        return None


def _selector(selector: DeviceSelector, path: Path, stored: Collection[str]) -> Errors:
    if selector.cel is None:
        return [required(at((path, "cel")))]
    expression = selector.cel.expression
    if expression in stored:  # ratcheting: unchanged expressions are not re-checked
        return []
    errs, _ = _cel_expression(
        expression, path.child("cel", "expression"), cel.SELECTOR_ENV, ("bool",)
    )
    return errs


def _selectors(selectors: Sequence[DeviceSelector], path: Path, stored: Collection[str]) -> Errors:
    errs = _max_items(selectors, DEVICE_SELECTORS_MAX, path)
    for i, s in enumerate(selectors):
        errs += _selector(s, path.index(i), stored)
    return errs


def _selector_expressions(selectors: Iterable[DeviceSelector]) -> set[str]:
    return {s.cel.expression for s in selectors if s.cel is not None}


# ============================================================== opaque config
#: Compact JSON as the API server measures it; one encoder for every call (``json.dumps``
#: with options builds a new one each time).
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _parameters(parameters: Any, path: Path) -> Errors:
    """Opaque parameters: a JSON object whose compact JSON encoding is at most 10 Ki."""
    if parameters is None:
        return [required(path)]
    if type(parameters) is not dict and not isinstance(parameters, Mapping):
        return [invalid(path, _VALUE_OMITTED, "must be a JSON object")]
    try:
        encoded = _COMPACT_JSON.encode(parameters)
    except (TypeError, ValueError, RecursionError) as e:
        return [invalid(path, _VALUE_OMITTED, f"must be a JSON object: {e}")]
    if nbytes(encoded) > OPAQUE_PARAMETERS_MAX_LENGTH:
        return [too_long(path, OPAQUE_PARAMETERS_MAX_LENGTH)]
    return []


def _opaque(opaque: OpaqueDeviceConfiguration | None, path: Path) -> Errors:
    if opaque is None:
        return [required(path)]
    return _driver_name(opaque.driver, at((path, "driver"))) + _parameters(
        opaque.parameters, at((path, "parameters"))
    )


# ============================================================== node selection
def _node_selector(selector: NodeSelector, path: Path) -> Errors:
    terms = at((path, "nodeSelectorTerms"))
    errs: Errors = []
    if not selector.node_selector_terms:
        errs.append(required(terms, "must have at least one node selector term"))
    for i, term in enumerate(selector.node_selector_terms):
        for j, req in enumerate(term.match_expressions):
            errs += _node_requirement(req, at((terms.index(i), "matchExpressions")).index(j), False)
        for j, req in enumerate(term.match_fields):
            errs += _node_requirement(req, at((terms.index(i), "matchFields")).index(j), True)
    return errs


def _node_requirement(req: NodeSelectorRequirement, path: Path, is_field: bool) -> Errors:
    errs: Errors = []
    ops = ("In", "NotIn") if is_field else ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
    if is_field:
        if req.key != "metadata.name":
            errs.append(not_supported(at((path, "key")), req.key, ["metadata.name"]))
    elif not req.key:
        errs.append(required(at((path, "key"))))
    else:
        errs += [
            invalid(at((path, "key")), req.key, m) for m in qualified_label_key_problems(req.key)
        ]
    values = at((path, "values"))
    if req.operator not in ops:
        errs.append(not_supported(at((path, "operator")), req.operator, ops))
    elif is_field and len(req.values) != 1:
        errs.append(
            required(
                values,
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            )
        )
    elif req.operator in ("In", "NotIn") and not req.values:
        errs.append(required(values, "must be specified when `operator` is 'In' or 'NotIn'"))
    elif req.operator in ("Exists", "DoesNotExist") and req.values:
        errs.append(
            forbidden(values, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        )
    elif req.operator in ("Gt", "Lt"):
        if len(req.values) != 1:
            errs.append(
                required(values, "must be specified single value when `operator` is 'Lt' or 'Gt'")
            )
        elif not req.values[0].lstrip("-").isdigit():
            errs.append(invalid(values.index(0), req.values[0], "must be an integer"))
    return errs


# ============================================================== metadata
_METADATA = at((ROOT, "metadata"))


def validate_object_meta(meta: ObjectMeta, path: Path = _METADATA) -> Errors:
    """Name (required, DNS subdomain), namespace (DNS label where present), labels."""
    errs = _dns_subdomain(meta.name, at((path, "name")))
    if meta.namespace:
        errs += _dns_label(meta.namespace, at((path, "namespace")))
    errs += _labels(meta.labels, at((path, "labels")))
    return errs
