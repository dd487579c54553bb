"""Which cluster a command talks to, resolved as ``kubectl`` resolves it.

In order: ``--kubeconfig``; else ``$KUBECONFIG`` (a list of files separated by
``:``, merged, missing ones skipped); else ``~/.kube/config`` when it exists; else
the in-cluster service account (``KUBERNETES_SERVICE_HOST`` set, as in a pod);
else there is no configuration. ``--context`` picks a context of the kubeconfig.
The namespace a command works in defaults to the context's namespace, then
``default``, as kubectl's ``-n`` does. Every failure is one :class:`KubeconfigError`
line naming where the configuration came from.

The scheduler also takes its identity and lease namespace from the Downward API
variables the Deployment of ``deploy/`` sets (:data:`POD_NAME_ENV`,
:data:`POD_NAMESPACE_ENV`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .api import ClientApi, load_api

__all__ = [
    "DEFAULT_LEASE_NAMESPACE",
    "POD_NAMESPACE_ENV",
    "POD_NAME_ENV",
    "ClusterConfig",
    "KubeconfigError",
    "connect",
    "lease_namespace",
]

POD_NAME_ENV = "POD_NAME"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
#: The namespace deploy/ runs the scheduler in, when POD_NAMESPACE is not set.
DEFAULT_LEASE_NAMESPACE = "dra-affinity-system"
_IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"


class KubeconfigError(Exception):
    """No usable cluster configuration; the message is one line, naming its source."""


@dataclass(frozen=True)
class ClusterConfig:
    """A connection and what it was made from."""

    api: ClientApi
    source: str  # a path, "$KUBECONFIG=...", or "in-cluster config"
    namespace: str  # the context's namespace, or "default"


def lease_namespace() -> str:
    """Where the scheduler keeps its Lease: its own namespace (``POD_NAMESPACE``), else
    the one deploy/ uses."""
    return os.environ.get(POD_NAMESPACE_ENV) or DEFAULT_LEASE_NAMESPACE


def _source(kubeconfig: str | None) -> str | None:
    """The kubeconfig file list to load, or None for in-cluster config."""
    if kubeconfig:
        return kubeconfig
    env = os.environ.get("KUBECONFIG", "")
    if any(p for p in env.split(os.pathsep)):
        return env
    home = Path("~/.kube/config").expanduser()
    if home.is_file():
        return str(home)
    return None


def connect(kubeconfig: str | None = None, context: str | None = None) -> ClusterConfig:
    """A connection to the cluster that kubectl would talk to with the same flags."""
    import yaml
    from kubernetes.config import ConfigException, list_kube_config_contexts

    path = _source(kubeconfig)
    if path is None:
        if not os.environ.get(_IN_CLUSTER_ENV):
            raise KubeconfigError("no cluster configuration: give --kubeconfig, set $KUBECONFIG, "
                                  "create ~/.kube/config, or run in a pod")
        if context:
            raise KubeconfigError(f"--context {context}: there is no kubeconfig to take it from "
                                  "(in-cluster config)")
        try:
            api = load_api(None)
        except Exception as e:
            raise KubeconfigError(f"in-cluster config: {_one_line(e)}") from None
        ns = _in_cluster_namespace()
        return ClusterConfig(api, "in-cluster config", ns)
    shown = path if kubeconfig else (f"$KUBECONFIG={path}" if os.environ.get("KUBECONFIG")
                                     else path)
    if kubeconfig and not Path(kubeconfig).is_file():
        raise KubeconfigError(f"{shown}: no such file")
    try:
        contexts, current = list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
        chosen = current
        if context:
            chosen = next((c for c in contexts if c.get("name") == context), None)
            if chosen is None:
                raise KubeconfigError(f"{shown}: no context named {context!r}")
        api = load_api(path, context)
    except KubeconfigError:
        raise
    except (ConfigException, yaml.YAMLError, OSError, ValueError, TypeError, KeyError,
            AttributeError) as e:
        raise KubeconfigError(f"{shown}: {_one_line(e)}") from None
    namespace = str(((chosen or {}).get("context") or {}).get("namespace") or "default")
    return ClusterConfig(api, shown, namespace)


def _in_cluster_namespace() -> str:
    try:
        text = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text()
    except OSError:
        return "default"
    return text.strip() or "default"


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 300 else text[:297] + "..."
