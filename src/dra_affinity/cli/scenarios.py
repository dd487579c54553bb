"""Scenario commands: ``simulate`` and ``metrics``."""

from __future__ import annotations

import sys

import click
from rich.console import Console

from dra_affinity.api.io import ManifestError

from ._base import (
    EXIT_EXPECTATION,
    EXIT_OK,
    _dump,
    _fail_input,
    _load_scenario,
    _render_simulation,
    main,
)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="Output format.")
@click.option("--scoring", type=click.Choice(["firstfit", "affinity"]), default="firstfit",
              show_default=True, help="Node and device preference: firstfit is the KEP's alpha.")
def simulate(file: str, output: str, scoring: str) -> None:
    """Run a scenario timeline on an embedded in-memory cluster.

    Exit status: 0 all expectations passed, 1 an expectation failed, 2 bad input.

    \b
    Example:
      dra-affinity simulate examples/story-3-subnet.yaml --output json
    """
    from dra_affinity.progress import spinner
    from dra_affinity.sim.runner import Simulation

    try:
        with spinner(f"loading {file}"):  # stderr, terminal only: parsing and initial objects
            sc = _load_scenario(file)
            sim = Simulation(sc, scoring)
    except ManifestError as e:
        _fail_input(e)
    steps = sc.spec.steps
    if sys.stderr.isatty() and len(steps) >= 500:
        from rich.progress import Progress

        with Progress(console=Console(stderr=True), transient=True) as prog:
            task = prog.add_task("simulating", total=len(steps))
            out = sim.run(lambda i: prog.update(task, completed=i + 1))
    else:
        out = sim.run()
    if output == "json":
        click.echo(_dump(out))
    else:
        _render_simulation(out)
    sys.exit(EXIT_EXPECTATION if out["expectationsFailed"] else EXIT_OK)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
def metrics(file: str) -> None:
    """Run a scenario and print the scheduler's Prometheus exposition text.

    \b
    Example:
      dra-affinity metrics examples/story-3-subnet.yaml
    """
    from dra_affinity.sim.runner import Simulation

    try:
        sim = Simulation(_load_scenario(file))
    except ManifestError as e:
        _fail_input(e)
    sim.run()
    click.echo(sim.metrics.exposition(), nl=False)


