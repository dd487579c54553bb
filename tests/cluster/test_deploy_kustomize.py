"""deploy/ as a kustomize base: rendered by kubectl and accepted by a real API server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.cluster

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _kubectl(bin_dir: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "KUBECONFIG": ""})


def test_kubectl_apply_k_deploy(control_plane: Any, bin_dir: Path) -> None:
    rendered = _kubectl(bin_dir, control_plane.kubeconfig, "kustomize", str(DEPLOY))
    assert rendered.returncode == 0, rendered.stderr
    kinds = sorted(d["kind"] for d in yaml.safe_load_all(rendered.stdout) if d)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "Namespace", "Role",
                     "RoleBinding", "Service", "ServiceAccount"]
    # every object through the server's admission and schema, as `kubectl apply -k` sends it;
    # the namespace for real (a dry run cannot create what the others live in), the rest as
    # a server dry run (a running Deployment would put pods on the shared plane's nodes)
    ns = _kubectl(bin_dir, control_plane.kubeconfig, "apply", "--server-side",
                  "-f", str(DEPLOY / "namespace.yaml"))
    assert ns.returncode == 0, ns.stderr
    applied = _kubectl(bin_dir, control_plane.kubeconfig, "apply", "-k", str(DEPLOY),
                       "--server-side", "--dry-run=server")
    assert applied.returncode == 0, applied.stderr
    assert "deployment.apps/dra-affinity-scheduler serverside-applied (server dry run)" in \
        applied.stdout
    monitoring = _kubectl(bin_dir, control_plane.kubeconfig, "kustomize",
                          str(DEPLOY / "monitoring"))
    assert monitoring.returncode == 0, monitoring.stderr
    assert sorted(d["kind"] for d in yaml.safe_load_all(monitoring.stdout) if d) == [
        "PrometheusRule", "ServiceMonitor"]
