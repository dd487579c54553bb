"""The KEP's metrics as a Prometheus registry: exposition text and a servable WSGI app."""

from __future__ import annotations

from typing import Any

from builders import Env, device_slice, meta_slice, nic_class, nic_params
from dra_affinity.observe.metrics import KEP_METRICS


def test_exposition_and_wsgi_serve_the_same_registry() -> None:
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.add_pod("a", nic_params("X"))
    env.add_pod("b", nic_params("Y"))
    env.schedule("a")
    env.schedule("b")
    text = env.scheduler.metrics.exposition()
    for name in KEP_METRICS:
        assert f"\n{name} " in text or text.startswith(f"{name} "), name
    assert "sharing_affinity_locked_devices 1.0" in text
    assert "sharing_affinity_lock_conflict_total 1.0" in text
    assert 'sharing_affinity_pool_locked_devices{driver="networking.example.com",pool="node-1"} 1.0' in text
    assert "sharing_affinity_filter_duration_seconds_count 2.0" in text
    assert "_created" not in text  # no wall-clock samples: output is reproducible

    status: list[str] = []

    def start_response(s: str, headers: list[Any]) -> None:
        status.append(s)

    body = b"".join(env.scheduler.metrics.wsgi_app()(
        {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""}, start_response))
    assert status[0].startswith("200")
    assert b"sharing_affinity_locked_devices 1.0" in body


def test_tallied_increments_reach_every_reader_exactly_once() -> None:
    """Hot-path increments are tallied as ints; each way of reading folds them in once."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    for name, subnet in (("a", "X"), ("b", "X"), ("c", "Y")):
        env.add_pod(name, nic_params(subnet))
        env.schedule(name)
    m = env.scheduler.metrics
    assert m.pending["sharing_affinity_compatible_reuse_total"] == 1  # b joined a's lock
    assert m.pending["sharing_affinity_lock_conflict_total"] == 1  # c met X's lock
    assert m.values()["sharing_affinity_compatible_reuse_total"] == 1
    assert all(n == 0 for n in m.pending.values())
    # read again, through every path: nothing is counted twice
    assert "sharing_affinity_compatible_reuse_total 1.0" in m.exposition()
    assert m.values()["sharing_affinity_lock_conflict_total"] == 1
    env.add_pod("d", nic_params("X"))
    env.schedule("d")
    body = b"".join(m.wsgi_app()({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics",
                                  "QUERY_STRING": ""}, lambda s, h: None))
    assert b"sharing_affinity_compatible_reuse_total 2.0" in body


def test_importing_the_library_changes_no_process_wide_setting() -> None:
    """Neither prometheus_client (other registries keep their ``*_created`` samples) nor
    the garbage collector is touched by importing every module of the package."""
    import subprocess
    import sys

    code = (
        "import gc, pkgutil, importlib, dra_affinity\n"
        "before = gc.get_threshold()\n"
        "for m in pkgutil.walk_packages(dra_affinity.__path__, 'dra_affinity.'):\n"
        "    importlib.import_module(m.name)\n"
        "from prometheus_client import CollectorRegistry, Counter, generate_latest\n"
        "r = CollectorRegistry(); Counter('c', 'c', registry=r).inc()\n"
        "assert b'c_created' in generate_latest(r), 'created samples disabled'\n"
        "assert gc.get_threshold() == before and gc.get_freeze_count() == 0, 'gc changed'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_per_pool_gauges_name_a_pool_whose_name_holds_a_slash() -> None:
    """Pool names are DNS subdomains joined by ``/``: the device ID is cut at the first
    and the last ``/``, not at the second."""
    pool = "node-1/nics"
    env = Env(nic_class(), meta_slice("node-1", pool=pool), device_slice("node-1", ["eth1"], pool=pool))
    env.add_pod("a", nic_params("X"))
    env.schedule("a")
    text = env.scheduler.metrics.exposition()
    assert ('sharing_affinity_pool_locked_devices{driver="networking.example.com",pool="node-1/nics"} 1.0'
            in text), text
