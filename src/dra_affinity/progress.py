"""Progress display for long commands: on stderr, and only when stderr is a terminal.

Long runs (a 5,000-node bench, a large scenario) say what they are doing while they
run. Piped or redirected output stays exactly what it was: no bars, no control
characters, nothing on stdout, so JSON and tables remain byte-for-byte deterministic.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

#: ``report(phase, done, total)``: ``done`` of ``total`` units of the named phase are finished.
PhaseReport = Callable[[str, int, int], None]


def stderr_is_terminal() -> bool:
    """True when progress should be shown (stderr is an interactive terminal)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


@contextmanager
def phase_progress(enabled: bool | None = None, *, transient: bool = False
                   ) -> Iterator[PhaseReport | None]:
    """A progress bar per phase on stderr, or ``None`` when disabled.

    ``enabled`` defaults to :func:`stderr_is_terminal`. Callers pass the yielded
    value on as an optional callback, so the disabled path costs nothing."""
    if enabled is None:
        enabled = stderr_is_terminal()
    if not enabled:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=transient) as prog:
        tasks: dict[str, TaskID] = {}

        def report(phase: str, done: int, total: int) -> None:
            task = tasks.get(phase)
            if task is None:
                task = tasks[phase] = prog.add_task(phase, total=total)
            prog.update(task, completed=done, total=total)

        yield report


@contextmanager
def spinner(message: str, enabled: bool | None = None) -> Iterator[None]:
    """An indeterminate spinner with elapsed time, for a phase with no countable steps."""
    if enabled is None:
        enabled = stderr_is_terminal()
    if not enabled:
        yield
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as prog:
        prog.add_task(message, total=None)
        yield
