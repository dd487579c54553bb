"""The command group, exit codes and the helpers every command shares."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console

from dra_affinity.api.io import ManifestError

if TYPE_CHECKING:
    from dra_affinity.sim.scenario import Scenario

EXIT_OK, EXIT_EXPECTATION, EXIT_INPUT = 0, 1, 2


def _fail_input(err: ManifestError | str) -> NoReturn:
    click.echo(f"error: {err}", err=True)
    sys.exit(EXIT_INPUT)


def _load_scenario(file: str) -> Scenario:
    """A scenario file, read by the one manifest reader every command uses."""
    from dra_affinity.api.io import read_text
    from dra_affinity.sim.scenario import load_scenario_text

    return load_scenario_text(read_text(file), file)


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False)


#: Width of output that is not a terminal: wide enough that no table cell is folded, so
#: a row stays one line for grep and awk, as with kubectl (rich needs a number).
PIPED_WIDTH = 100_000


def _console(markup: bool = False) -> Console:
    """Output console. Markup is off unless a renderer writes its own: names and
    messages from manifests may contain ``[...]`` and must print as written. A terminal
    gets tables fitted to its width; a pipe or file gets each row on one line."""
    tty = sys.stdout.isatty()
    return Console(width=None if tty else PIPED_WIDTH, force_terminal=tty, no_color=not tty,
                   highlight=False, soft_wrap=False, markup=markup, emoji=False)


def _render_simulation(out: dict[str, Any]) -> None:
    """The simulation table. Its renderer styles lines with markup around messages that
    carry manifest text; text that is not valid markup is printed without styles."""
    from rich.errors import MarkupError

    from dra_affinity.sim.render import render

    con = _console(markup=True)
    try:
        with con.capture() as cap:
            render(out, con)
    except MarkupError:
        con = _console(markup=False)
        with con.capture() as cap:
            render(out, con)
    click.echo(cap.get(), nl=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dra-affinity")
@click.option("--verbose", "-v", is_flag=True, help="Print scheduler warnings (logs) on stderr.")
def main(verbose: bool) -> None:
    """Kubernetes DRA with Sharing Affinity (KEP-5981): simulate, validate, explain.

    \b
    Example:
      dra-affinity simulate examples/story-3-subnet.yaml
    """
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("dra_affinity")
    root.handlers[:] = [handler] if verbose else [logging.NullHandler()]
    root.propagate = False
    root.setLevel(logging.INFO if verbose else logging.WARNING)


def _scenario_sim(file: str, at_step: int | None) -> Any:
    from dra_affinity.tools import run_until

    try:
        sc = _load_scenario(file)
        if at_step is not None and not 0 <= at_step <= len(sc.spec.steps):
            _fail_input(f"{file}: --at-step {at_step} is outside 0..{len(sc.spec.steps)}")
        return run_until(sc, at_step)
    except ManifestError as e:
        _fail_input(e)
