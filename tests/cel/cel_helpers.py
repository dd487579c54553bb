"""Shared helpers for the CEL engine tests."""

from __future__ import annotations

from collections.abc import Mapping

from dra_affinity.cel import EXTRACTOR_ENV, Environment


def ev(expr: str, obj: object = None, *, env: Environment = EXTRACTOR_ENV, budget: int = 10**7) -> object:
    """Compile and evaluate ``expr`` with ``object`` bound to ``obj``; return the value."""
    return env.compile(expr).evaluate({"object": obj}, budget)[0]


def ev_cost(expr: str, activation: Mapping[str, object] | None = None, *, env: Environment = EXTRACTOR_ENV,
            budget: int = 10**7) -> tuple[object, int]:
    return env.compile(expr).evaluate(activation if activation is not None else {"object": None}, budget)
