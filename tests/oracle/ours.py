"""The only place where the oracle suites touch dra-affinity's internals.

Both suites compare *normalized* results. This module turns our engine's and
our allocator's answers into that normal form; ``normalize_oracle_*`` turn the
oracle's JSON into the same form. When our internals move (the allocator is
being restructured), only the adapters here need updating.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dra_affinity.cel import (
    EXTRACTOR_ENV,
    SELECTOR_ENV,
    SHARING_AFFINITY_CEL_MAX_COST,
    CELCompileError,
    CELCostExceeded,
    CELEvalError,
    CelType,
    Quantity,
    Semver,
    UInt,
)

# The runtime cost limits upstream applies: the VAP base environment's
# per-call limit (object) and CELSelectorExpressionMaxCost (device); both 1e6.
OBJECT_COST_LIMIT = 1_000_000
DEVICE_COST_LIMIT = 1_000_000
assert SHARING_AFFINITY_CEL_MAX_COST == OBJECT_COST_LIMIT

# A normalized CEL value: (type name, payload), payload hashable and JSON-able.
Tagged = tuple[str, Any]


@dataclass(frozen=True)
class CelOutcome:
    """One side's answer for one expression, in a comparable normal form.

    ``kind`` is ``value`` or an error class: ``compile``, ``runtime``,
    ``cost``. ``estimate`` is the static (min, max) cost range, ``None`` when
    the expression did not compile or the side does not report it; a ``None``
    min means "not reported". ``cost`` is the actual runtime cost.
    """

    kind: str
    value: Tagged | None = None
    message: str = ""
    estimate: tuple[int | None, int] | None = None
    cost: int | None = None


def _canon_double(f: float) -> str:
    if math.isnan(f):
        return "NaN"
    return repr(float(f))


def _sorted_map(pairs: list[tuple[Tagged, Tagged]]) -> Tagged:
    return ("map", tuple(sorted(pairs, key=lambda kv: json.dumps(kv[0]))))


def tag_ours(v: object) -> Tagged:
    """Our engine's runtime value -> normalized tagged value."""
    if v is None:
        return ("null_type", None)
    if type(v) is bool:
        return ("bool", v)
    if type(v) is int:
        return ("int", str(v))
    if isinstance(v, UInt):
        return ("uint", str(int(v)))
    if type(v) is float:
        return ("double", _canon_double(v))
    if isinstance(v, str):
        return ("string", str(v))
    if isinstance(v, bytes):
        return ("bytes", base64.b64encode(v).decode())
    if isinstance(v, CelType):
        return ("type", v.name)
    if isinstance(v, Quantity):
        return ("kubernetes.Quantity", str(v))
    if isinstance(v, Semver):
        return ("kubernetes.Semver", str(v))
    if isinstance(v, Mapping):
        return _sorted_map([(tag_ours(k), tag_ours(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return ("list", tuple(tag_ours(x) for x in v))
    return (f"python:{type(v).__name__}", repr(v))


def tag_oracle(t: Mapping[str, Any]) -> Tagged:
    """The oracle's ``{"t": type, "v": value}`` -> normalized tagged value."""
    kind, v = t["t"], t.get("v")
    if kind == "double":
        return ("double", _canon_double(float(v)))
    if kind == "list":
        return ("list", tuple(tag_oracle(x) for x in v))
    if kind == "map":
        return _sorted_map([(tag_oracle(k), tag_oracle(x)) for k, x in v])
    if kind == "optional_type":
        return ("optional_type", None if v is None else tag_oracle(v))
    return (kind, v)


def device_activation(device: Mapping[str, Any]) -> dict[str, Any]:
    """``device`` as a DRA selector sees it, from a ResourceSlice-style device JSON.

    Attributes and capacities without a domain get the driver's; unknown
    domains are absent (our engine reports them as an empty map).
    """
    driver = device["driver"]
    attrs: dict[str, dict[str, Any]] = {}
    for q, a in (device.get("attributes") or {}).items():
        domain, _, name = q.partition("/") if "/" in q else (driver, "", q)
        if "version" in a:
            value: Any = Semver.parse(a["version"])
        else:
            (value,) = (a[k] for k in ("string", "int", "bool") if k in a)
        attrs.setdefault(domain, {})[name] = value
    caps: dict[str, dict[str, Any]] = {}
    for q, c in (device.get("capacity") or {}).items():
        domain, _, name = q.partition("/") if "/" in q else (driver, "", q)
        caps.setdefault(domain, {})[name] = Quantity.parse(c["value"])
    return {
        "driver": driver,
        "attributes": attrs,
        "capacity": caps,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
    }


def cel_ours(env: str, expression: str, data: Any) -> CelOutcome:
    """Compile and evaluate with our engine, in the environment ``env`` (object|device)."""
    environment = EXTRACTOR_ENV if env == "object" else SELECTOR_ENV
    try:
        program = environment.compile(expression)
    except CELCompileError as e:
        return CelOutcome("compile", message=str(e))
    est = program.cost_estimate
    estimate: tuple[int | None, int] = (est.min, est.max)
    if env == "device":
        activation = {"device": device_activation(data)}
        limit = DEVICE_COST_LIMIT
    else:
        activation = {"object": data}
        limit = OBJECT_COST_LIMIT
    try:
        value, cost = program.evaluate(activation, limit)
    except CELCostExceeded as e:
        return CelOutcome("cost", message=str(e), estimate=estimate, cost=e.cost)
    except CELEvalError as e:
        return CelOutcome("runtime", message=str(e), estimate=estimate, cost=e.cost)
    if env == "device" and type(value) is not bool:
        # As the scheduler does: a selector must produce a bool.
        return CelOutcome("runtime", message=f"selector result is {tag_ours(value)[0]}, not bool",
                          estimate=estimate, cost=cost)
    return CelOutcome("value", value=tag_ours(value), estimate=estimate, cost=cost)


def cel_oracle_outcome(answer: Mapping[str, Any]) -> CelOutcome:
    """The oracle's answer to a ``cel`` request -> :class:`CelOutcome`."""
    est = answer.get("estimate")
    estimate = (est["min"], est["max"]) if est else None
    err = answer.get("error")
    if err is not None:
        return CelOutcome(err["class"], message=err["message"], estimate=estimate,
                          cost=answer.get("cost"))
    return CelOutcome("value", value=tag_oracle(answer["value"]), estimate=estimate,
                      cost=answer.get("cost"))
