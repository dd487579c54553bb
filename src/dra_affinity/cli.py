"""``dra-affinity``: a thin command-line shell over the library."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click
from rich.console import Console

from dra_affinity.api.io import ManifestError

EXIT_OK, EXIT_EXPECTATION, EXIT_INPUT = 0, 1, 2


def _fail_input(err: ManifestError | str) -> NoReturn:
    click.echo(f"error: {err}", err=True)
    sys.exit(EXIT_INPUT)


def _dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False)


def _console() -> Console:
    tty = sys.stdout.isatty()
    return Console(width=None if tty else 160, force_terminal=tty, no_color=not tty,
                   highlight=False, soft_wrap=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dra-affinity")
def main() -> None:
    """Kubernetes DRA with Sharing Affinity (KEP-5981): simulate, validate, explain.

    \b
    Example:
      dra-affinity simulate examples/story-3-subnet.yaml
    """


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
    from dra_affinity.sim.runner import Simulation
    from dra_affinity.sim.scenario import load_scenario

    try:
        sc = load_scenario(file)
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
        from dra_affinity.sim.render import render

        render(out, _console())
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
    from dra_affinity.sim.scenario import load_scenario

    try:
        sim = Simulation(load_scenario(file))
    except ManifestError as e:
        _fail_input(e)
    sim.run()
    click.echo(sim.metrics.exposition(), nl=False)


if __name__ == "__main__":
    main()
