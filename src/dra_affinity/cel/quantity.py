"""The CEL quantity library's value type: the API's :class:`~dra_affinity.api.quantity.Quantity`.

One type serves the API models, the allocator and CEL; this module re-exports
it under the engine's namespace.
"""

from dra_affinity.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    MAX_DECIMAL_EXPONENT,
    MAX_DIGITS,
    Format,
    Quantity,
    as_quantity,
)

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "MAX_DECIMAL_EXPONENT",
    "MAX_DIGITS",
    "Format",
    "Quantity",
    "as_quantity",
]
