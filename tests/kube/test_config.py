"""Finding the cluster as kubectl does, and one clear line when there is none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from dra_affinity.cli import main
from dra_affinity.kube.config import (
    DEFAULT_LEASE_NAMESPACE,
    KubeconfigError,
    connect,
    lease_namespace,
)


def _kubeconfig(path: Path, server: str, *, namespace: str | None = None,
                extra_context: str | None = None) -> Path:
    ctx: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace:
        ctx["namespace"] = namespace
    contexts = [{"name": "main", "context": ctx}]
    clusters = [{"name": "c", "cluster": {"server": server}}]
    if extra_context:
        contexts.append({"name": extra_context, "context": {"cluster": "other", "user": "u"}})
        clusters.append({"name": "other", "cluster": {"server": "https://other.invalid:6443"}})
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "main", "contexts": contexts,
        "clusters": clusters, "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _host(cfg: object) -> str:
    return str(cfg.api.client.configuration.host)  # type: ignore[attr-defined]


def test_flag_then_env_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = _kubeconfig(tmp_path / "flag", "https://flag.invalid:6443", namespace="team-a")
    env = _kubeconfig(tmp_path / "env", "https://env.invalid:6443")
    home = tmp_path / "home" / ".kube"
    home.mkdir(parents=True)
    _kubeconfig(home / "config", "https://home.invalid:6443")
    assert _host(connect()) == "https://home.invalid:6443"
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{env}")
    cfg = connect()
    assert _host(cfg) == "https://env.invalid:6443" and cfg.source.startswith("$KUBECONFIG=")
    cfg = connect(str(flag))
    assert _host(cfg) == "https://flag.invalid:6443"
    assert cfg.namespace == "team-a" and cfg.source == str(flag)


def test_context_is_chosen_and_an_unknown_one_is_named(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "kc", "https://main.invalid:6443", extra_context="staging")
    assert _host(connect(str(path), "staging")) == "https://other.invalid:6443"
    with pytest.raises(KubeconfigError, match="no context named 'prod'"):
        connect(str(path), "prod")


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{not yaml: [", ""),
    ("apiVersion: v1\nkind: Config\n", ""),
])
def test_bad_kubeconfig_is_one_line_naming_the_file(tmp_path: Path, content: str | None,
                                                    message: str) -> None:
    path = tmp_path / "kc"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeconfigError) as err:
        connect(str(path))
    text = str(err.value)
    assert text.startswith(str(path)) and "\n" not in text and message in text


def test_no_configuration_anywhere() -> None:
    with pytest.raises(KubeconfigError, match="no cluster configuration"):
        connect()


def test_in_cluster_without_a_service_account(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeconfigError, match=r"^in-cluster config: "):
        connect()


def test_lease_namespace_follows_the_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    assert lease_namespace() == DEFAULT_LEASE_NAMESPACE
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    assert lease_namespace() == "ops"


@pytest.mark.parametrize("args", [["locks"], ["snapshot"], ["explain", "--pod", "p"],
                                  ["plan", "--remove-pool", "d/p"]])
def test_commands_say_it_in_one_line_and_exit_2(args: list[str], tmp_path: Path) -> None:
    res = CliRunner().invoke(main, [*args, "--kubeconfig", str(tmp_path / "nope")])
    assert res.exit_code == 2, res.output
    assert res.output == f"error: {tmp_path / 'nope'}: no such file\n"


def test_scheduler_defaults_follow_the_deployment(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Lease namespace from POD_NAMESPACE, identity from POD_NAME, metrics on loopback."""
    import dra_affinity.kube.runner as runner

    seen: list[runner.Options] = []
    kept: list[int] = []

    class Recording:
        def __init__(self, api: Any, opts: runner.Options, features: object) -> None:
            seen.append(opts)
            kept.append(api.client.rest_client.pool_manager.connection_pool_kw["maxsize"])

        def run(self) -> int:
            return 0

    monkeypatch.setattr(runner, "SchedulerProcess", Recording)
    monkeypatch.setattr(runner, "setup_json_logging", lambda level: None)
    path = _kubeconfig(tmp_path / "kc", "https://main.invalid:6443")
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    monkeypatch.setenv("POD_NAME", "dra-affinity-scheduler-7d9f-x2")
    res = CliRunner().invoke(main, ["scheduler"])
    assert res.exit_code == 0, res.output
    [opts] = seen
    assert (opts.lease_namespace, opts.identity, opts.metrics_address) == (
        "ops", "dra-affinity-scheduler-7d9f-x2", "127.0.0.1")
    # one kept-alive connection per thread that may send at once: 6 watches, 16
    # bindings, the loop, Events, the Lease
    assert kept == [runner.connections(opts)] == [25]
    monkeypatch.delenv("POD_NAMESPACE")
    CliRunner().invoke(main, ["scheduler", "--lease-namespace", "elsewhere"])
    assert seen[-1].lease_namespace == "elsewhere"
    CliRunner().invoke(main, ["scheduler"])
    assert seen[-1].lease_namespace == DEFAULT_LEASE_NAMESPACE
