"""Run one command line in-process and classify the result (shared by tests and the long run)."""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from click.testing import CliRunner

from dra_affinity.cli import main


@dataclass(frozen=True)
class Crash:
    """A run that did not end in exit status 0, 1 or 2 with a traceback-free output."""

    args: tuple[str, ...]
    detail: str


def run(args: list[str]) -> Crash | None:
    """None when the command ended cleanly; the crash otherwise."""
    runner = CliRunner()
    try:
        res = runner.invoke(main, args, catch_exceptions=False)
    except Exception:  # the finding itself: an exception escaped the command
        return Crash(tuple(args), traceback.format_exc(limit=-8))
    if res.exit_code not in (0, 1, 2):
        return Crash(tuple(args), f"exit status {res.exit_code}\n{res.output[-2000:]}")
    if "Traceback (most recent call last)" in res.output:
        return Crash(tuple(args), res.output[-4000:])
    return None
