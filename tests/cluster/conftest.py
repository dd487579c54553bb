"""Fixtures for tests against a real control plane (marker ``cluster``).

These tests build upstream binaries on first use (minutes, then cached) and run
etcd + kube-apiserver + kube-controller-manager + kube-scheduler, so they are not
part of the default run: they are deselected unless the marker expression names
them (``pytest -m cluster tests/cluster``) or DRA_AFFINITY_CLUSTER=1 is set.
Without Go they skip, except under CI (``CI`` set), where a missing Go fails.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from controlplane import ControlPlane, build_binaries

HERE = Path(__file__).parent


def _cluster_selected(config: pytest.Config) -> bool:
    return "cluster" in (config.option.markexpr or "") or os.environ.get(
        "DRA_AFFINITY_CLUSTER", ""
    ) not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop cluster tests from runs that did not ask for them (the default suite stays fast)."""
    if _cluster_selected(config):
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (drop if item.get_closest_marker("cluster") is not None else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def require_go() -> None:
    """Skip (or, under CI, fail) when Go is not installed."""
    if shutil.which("go") is not None:
        return
    message = (
        "the cluster tests build kube-apiserver, kube-controller-manager, kube-scheduler and "
        "etcd from upstream Go modules, and 'go' is not on PATH (install Go >= 1.26)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {message}", pytrace=False)
    pytest.skip(message)


@dataclass(frozen=True)
class ControlPlaneHandle:
    """What a cluster test gets: the running plane, its admin kubeconfig, an API client."""

    plane: ControlPlane
    kubeconfig: Path
    client: Any  # kubernetes.client.ApiClient


@pytest.fixture(scope="session")
def bin_dir() -> Path:
    """The control-plane binaries, built on first use and cached by version."""
    require_go()
    return build_binaries()


@pytest.fixture(scope="session")
def control_plane(
    bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlaneHandle]:
    """One control plane for the whole session, with the stock kube-scheduler running.

    Tests share it, so each works in its own namespace and names cluster-scoped
    objects (Nodes, DeviceClasses, ResourceSlices) uniquely.
    """
    workdir = tmp_path_factory.mktemp("control-plane")
    plane = ControlPlane(workdir, bin_dir, with_scheduler=True)
    plane.start()
    api = plane.api_client()
    try:
        yield ControlPlaneHandle(plane=plane, kubeconfig=plane.kubeconfig, client=api)
    finally:
        api.close()
        plane.stop()
