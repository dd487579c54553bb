"""Exception hierarchy of the CEL engine.

Every failure the engine reports is a :class:`CELError`: compilation raises
:class:`CELCompileError`, evaluation raises :class:`CELEvalError` (or its
subclass :class:`CELCostExceeded`). No other exception type escapes
:meth:`Environment.compile` or :meth:`Program.evaluate`.
"""

from __future__ import annotations

from typing import Final

# Reasons carried by CELEvalError.reason.
RUNTIME: Final = "runtime"
MISSING_FIELD: Final = "missing_field"
NO_SUCH_OVERLOAD: Final = "no_such_overload"
OVERFLOW: Final = "overflow"
DIVISION_BY_ZERO: Final = "division_by_zero"
INVALID_ARGUMENT: Final = "invalid_argument"
COST_EXCEEDED: Final = "cost_exceeded"

EVAL_REASONS: Final = frozenset(
    {
        RUNTIME,
        MISSING_FIELD,
        NO_SUCH_OVERLOAD,
        OVERFLOW,
        DIVISION_BY_ZERO,
        INVALID_ARGUMENT,
        COST_EXCEEDED,
    }
)


def _one_line(text: str) -> str:
    return " ".join(text.split()) if ("\n" in text or "\r" in text) else text


class CELError(Exception):
    """Base class of all CEL errors. ``str()`` is a one-line message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = _one_line(message)

    def __str__(self) -> str:
        return self.message


class CELCompileError(CELError):
    """Parse or type-check failure.

    ``position`` is the 0-based character offset in the expression where the
    problem was detected, when known.
    """

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position

    def __str__(self) -> str:
        if self.position is None:
            return self.message
        return f"{self.message} (at offset {self.position})"


class CELEvalError(CELError):
    """Runtime error.

    ``reason`` classifies the error (see ``EVAL_REASONS``); ``cost`` is the
    runtime cost accumulated up to the failure, filled in by
    :meth:`Program.evaluate`.
    """

    def __init__(self, message: str, reason: str = RUNTIME) -> None:
        super().__init__(message)
        self.reason = reason
        self.cost = 0


class CELCostExceeded(CELEvalError):
    """The running cost passed the budget; evaluation was stopped."""

    def __init__(self, budget: int, cost: int) -> None:
        super().__init__(
            f"operation cancelled: actual cost limit exceeded (cost {cost} > budget {budget})",
            COST_EXCEEDED,
        )
        self.budget = budget
        self.cost = cost
