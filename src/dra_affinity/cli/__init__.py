"""``dra-affinity``: a thin command-line shell over the library.

One module per group of commands; importing them registers each command on
:data:`main`, the click group (the console script's entry point).
"""

from __future__ import annotations

from dra_affinity.bench.scale import BENCH_SCALE_ENV

from . import authoring, bench, cluster, scenarios
from ._base import EXIT_EXPECTATION, EXIT_INPUT, EXIT_OK, main

__all__ = ["BENCH_SCALE_ENV", "EXIT_EXPECTATION", "EXIT_INPUT", "EXIT_OK", "authoring", "bench",
           "cluster", "kubectl_plugin", "main", "scenarios"]

#: How kubectl runs the plugin: ``kubectl dra-affinity ...`` finds ``kubectl-dra_affinity``.
KUBECTL_PLUGIN_NAME = "kubectl dra-affinity"


def kubectl_plugin() -> None:
    """The ``kubectl-dra_affinity`` executable: the same commands, named as kubectl runs
    them in help and errors. kubectl hands the plugin every argument after its name,
    so ``--kubeconfig``, ``--context`` and ``-n`` reach the command as kubectl users write
    them, and ``$KUBECONFIG`` is read as kubectl reads it."""
    main(prog_name=KUBECTL_PLUGIN_NAME)
