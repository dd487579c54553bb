"""Environments and compiled programs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from dra_affinity.api.resource import (  # the API's limits, which the cost model assumes
    OPAQUE_PARAMETERS_MAX_LENGTH,
)

from .checker import Checker
from .cost import COST_CAP, Estimator
from .errors import RUNTIME, CELCompileError, CELCostExceeded, CELError, CELEvalError
from .interpreter import Compiler, Fn, Meter
from .lib_dra import adapt_device
from .parser import MAX_NESTING_DEPTH, parse
from .types import DEVICE, Ty, parse_type

COMPILE_CACHE_SIZE: Final = 4096


@dataclass(frozen=True)
class CostEstimate:
    """Static cost bounds of an expression.

    ``min``: worst-case cost with every activation-derived string/list/map
    empty, i.e. the cost that cannot depend on claim data. ``max``: worst-case
    cost with activation-derived strings up to ``OPAQUE_PARAMETERS_MAX_LENGTH``
    characters and lists/maps up to ``OPAQUE_PARAMETERS_MAX_LENGTH // 2``
    elements. Both are capped at 2**63-1.
    """

    min: int
    max: int


class Program:
    """A compiled expression. Immutable, thread-safe and reusable."""

    __slots__ = ("_device_vars", "_fn", "cost_estimate", "expression", "result_type", "static_type")

    expression: str
    result_type: str
    static_type: Ty
    cost_estimate: CostEstimate
    _fn: Fn
    _device_vars: tuple[str, ...]

    def __init__(
        self,
        expression: str,
        static_type: Ty,
        cost_estimate: CostEstimate,
        fn: Fn,
        device_vars: tuple[str, ...] = (),
    ) -> None:
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "static_type", static_type)
        object.__setattr__(self, "result_type", static_type.name)
        object.__setattr__(self, "cost_estimate", cost_estimate)
        object.__setattr__(self, "_fn", fn)
        # Variables declared `device`: their attribute and capacity maps answer
        # an empty map for an unknown domain, as Kubernetes' activation does.
        object.__setattr__(self, "_device_vars", device_vars)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Program is immutable")

    def __repr__(self) -> str:
        return f"Program({self.expression!r}, result_type={self.result_type!r})"

    def evaluate(self, activation: Mapping[str, object], budget: int) -> tuple[object, int]:
        """Evaluate against ``activation`` with a cost ``budget``.

        Returns ``(value, actual_cost)``. Raises :class:`CELEvalError` (with
        ``.cost`` set to the cost spent) or :class:`CELCostExceeded` as soon
        as the running cost passes ``budget``; never any other exception.
        """
        meter = Meter(max(int(budget), 0))
        try:
            env = dict(activation)
            for name in self._device_vars:
                if name in env:
                    env[name] = adapt_device(env[name])
            value = self._fn(env, meter)
        except CELCostExceeded:
            raise
        except CELEvalError as e:
            e.cost = meter.cost
            raise
        except RecursionError:
            err = CELEvalError("evaluation nested too deeply (input data or expression)", RUNTIME)
            err.cost = meter.cost
            raise err from None
        except Exception as e:  # a bug or an exotic input value; never leak it
            err = CELEvalError(f"internal evaluation error: {type(e).__name__}: {e}", RUNTIME)
            err.cost = meter.cost
            raise err from None
        return value, meter.cost


class Environment:
    """A set of declared variables plus the standard library; compiles and caches programs."""

    def __init__(
        self,
        name: str,
        variables: Mapping[str, str],
        *,
        data_string_bound: int = OPAQUE_PARAMETERS_MAX_LENGTH,
        data_collection_bound: int = OPAQUE_PARAMETERS_MAX_LENGTH // 2,
        cache_size: int = COMPILE_CACHE_SIZE,
        bindings: bool = False,
        result_types: frozenset[str] | None = None,
    ) -> None:
        """``bindings``: ``cel.bind`` is available (cel-go ext.Bindings, which DRA's
        selector environment adds). ``result_types``: the static result types an
        expression may have (checked at compile time, as upstream does for selectors);
        ``None`` allows any."""
        self.name = name
        self.bindings = bindings
        self.result_types = result_types
        self.declarations: dict[str, Ty] = {k: parse_type(v) for k, v in variables.items()}
        self._names = frozenset(self.declarations)
        self._str_bound = data_string_bound
        self._coll_bound = data_collection_bound
        self._cache: OrderedDict[str, Program | CELCompileError] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Environment({self.name!r}, {{{', '.join(f'{k!r}: {str(v)!r}' for k, v in self.declarations.items())}}})"

    def compile(self, expression: str) -> Program:
        """Parse, check and compile ``expression``; raises :class:`CELCompileError` only.

        Results (and compile errors) are cached by expression text, so
        compiling the same text again returns the same :class:`Program`.
        """
        if not isinstance(expression, str):
            raise CELCompileError(f"expression must be a string, not {type(expression).__name__}")
        with self._lock:
            hit = self._cache.get(expression)
            if hit is not None:
                self._cache.move_to_end(expression)
        if hit is None:
            try:
                hit = self._compile(expression)
            except CELCompileError as e:
                hit = e
            except RecursionError:
                hit = CELCompileError(f"expression nesting too deep (limit {MAX_NESTING_DEPTH})")
            except CELError as e:  # pragma: no cover - defensive
                hit = CELCompileError(str(e))
            except Exception as e:  # pragma: no cover - defensive
                hit = CELCompileError(f"internal compile error: {type(e).__name__}: {e}")
            with self._lock:
                self._cache[expression] = hit
                self._cache.move_to_end(expression)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        if isinstance(hit, CELCompileError):
            raise hit.with_traceback(None)
        return hit

    def _compile(self, expression: str) -> Program:
        tree = parse(expression)
        checker = Checker(self.declarations, bindings=self.bindings)
        result = checker.check(tree, {})
        if self.result_types is not None and result.name not in self.result_types:
            allowed = " or ".join(sorted(self.result_types))
            raise CELCompileError(f"expression must return {allowed}, not {result}", 0)
        compiler = Compiler(self._names)
        compiler.check_constants(tree)
        fn = compiler.compile(tree)
        done = frozenset(compiler.precompiled)
        low = Estimator(checker.types, self._names, 0, 0, done).estimate(tree, {})[0]
        high = Estimator(checker.types, self._names, self._str_bound, self._coll_bound,
                         done).estimate(tree, {})[0]
        estimate = CostEstimate(min(low, COST_CAP), min(max(high, low), COST_CAP))
        device_vars = tuple(k for k, t in self.declarations.items() if t == DEVICE)
        return Program(expression, result, estimate, fn, device_vars)


EXTRACTOR_ENV: Final = Environment("sharingAffinity extractor", {"object": "dyn"})
SELECTOR_ENV: Final = Environment(
    "device selector",
    {"device": "device"},
    bindings=True,
    result_types=frozenset({"bool", "dyn"}),
)
