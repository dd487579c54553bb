"""kubectl's way of picking a cluster, shared by every command that reads one."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from ._base import EXIT_EXPECTATION, _fail_input

if TYPE_CHECKING:
    from dra_affinity.kube.config import ClusterConfig

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(fn: F) -> F:
    """kubectl's flags for picking a cluster and a namespace."""
    fn = click.option("--namespace", "-n", default=None,
                      help="Namespace of the pods named (default: the context's, else default).")(fn)
    fn = click.option("--context", default=None, help="The kubeconfig context to use.")(fn)
    return click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
                        help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, "
                             "then in-cluster config, as kubectl).")(fn)


def connect(kubeconfig: str | None, context: str | None) -> ClusterConfig:
    """The cluster, or exit 2 with one line saying why there is none."""
    from dra_affinity.kube.config import KubeconfigError
    from dra_affinity.kube.config import connect as do_connect

    try:
        return do_connect(kubeconfig, context)
    except KubeconfigError as e:
        _fail_input(str(e))


def api_failed(cfg: ClusterConfig, e: Exception) -> NoReturn:
    click.echo(f"error: {cfg.source}: the API server answered {e}", err=True)
    sys.exit(EXIT_EXPECTATION)
