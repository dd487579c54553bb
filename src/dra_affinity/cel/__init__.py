"""A metered CEL engine for DRA sharing-affinity extractors and device selectors.

Expressions are parsed with cel-python's LALR (lark) grammar, converted to a
small immutable AST, type-checked, compiled to Python closures once, and
evaluated with a deterministic cost budget modelled on cel-go's. No Python is
ever executed from expression text; regular expressions use RE2.

See docs/cel.md for the environment, the cost model and the comparison with
other Python CEL implementations.
"""

from dra_affinity.api.resource import (
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    OPAQUE_PARAMETERS_MAX_LENGTH,
    SHARING_AFFINITY_CEL_MAX_COST,
)

from .env import (
    EXTRACTOR_ENV,
    SELECTOR_ENV,
    CostEstimate,
    Environment,
    Program,
)
from .errors import CELCompileError, CELCostExceeded, CELError, CELEvalError
from .extract import (
    MAX_AFFINITY_VALUE_LENGTH,
    ConfigObject,
    ExtractionResult,
    Extractor,
    OutcomeKind,
    extract,
)
from .parser import MAX_EXPRESSION_LENGTH, MAX_NESTING_DEPTH
from .quantity import Quantity
from .semver import Semver
from .values import CelType, UInt

__all__ = [
    "CEL_SELECTOR_EXPRESSION_MAX_LENGTH",
    "EXTRACTOR_ENV",
    "MAX_AFFINITY_VALUE_LENGTH",
    "MAX_EXPRESSION_LENGTH",
    "MAX_NESTING_DEPTH",
    "OPAQUE_PARAMETERS_MAX_LENGTH",
    "SELECTOR_ENV",
    "SHARING_AFFINITY_CEL_MAX_COST",
    "CELCompileError",
    "CELCostExceeded",
    "CELError",
    "CELEvalError",
    "CelType",
    "ConfigObject",
    "CostEstimate",
    "Environment",
    "ExtractionResult",
    "Extractor",
    "OutcomeKind",
    "Program",
    "Quantity",
    "Semver",
    "UInt",
    "extract",
]
