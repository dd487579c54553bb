"""Shared helpers for the CEL engine tests."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from dra_affinity.cel import EXTRACTOR_ENV, Environment


def ev(expr: str, obj: object = None, *, env: Environment = EXTRACTOR_ENV, budget: int = 10**7) -> object:
    """Compile and evaluate ``expr`` with ``object`` bound to ``obj``; return the value."""
    return env.compile(expr).evaluate({"object": obj}, budget)[0]


def ev_cost(expr: str, activation: Mapping[str, object] | None = None, *, env: Environment = EXTRACTOR_ENV,
            budget: int = 10**7) -> tuple[object, int]:
    return env.compile(expr).evaluate(activation if activation is not None else {"object": None}, budget)


def bytecodes(fn: Callable[[], object]) -> tuple[int, BaseException | None]:
    """Python bytecodes executed by ``fn()`` (deterministic for one Python version),
    and the exception it raised, if any. Stands in for timing: work, not seconds."""
    n = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal n
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        elif event == "opcode":
            n += 1
        return tracer

    err: BaseException | None = None
    sys.settrace(tracer)
    try:
        fn()
    except Exception as e:
        err = e
    finally:
        sys.settrace(None)
    return n, err


def peak_allocation(fn: Callable[[], object]) -> tuple[int, BaseException | None]:
    """Peak bytes traced while running ``fn()``, and the exception it raised, if any."""
    err: BaseException | None = None
    tracemalloc.start()
    try:
        fn()
    except Exception as e:
        err = e
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, err
