"""The alert rules of deploy/monitoring, unit-tested by ``promtool test rules``.

Each alert fires on the series it is for and stays silent on a healthy trajectory of
the same metrics; no critical alert fires when the scheduler is merely not scraped.
The cases are written here as input series and expectations; the expected annotations
are read from the rules file (promtool compares them), so the text lives in one place.
promtool comes from Debian's ``prometheus`` package (``test/promtool/install.sh``, run by
``.ci/run``); without it these tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MONITORING = ROOT / "deploy" / "monitoring"
RULES = MONITORING / "rules.yaml"
CACHE = Path(os.environ.get("DRA_AFFINITY_CACHE", Path.home() / ".cache" / "dra-affinity"))


def _promtool() -> str:
    found = shutil.which("promtool") or next(
        (str(p) for p in sorted((CACHE / "promtool").glob("*/usr/bin/promtool"))), None)
    if found is None:
        message = "promtool is not installed (test/promtool/install.sh fetches it)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {message}", pytrace=False)
        pytest.skip(message)
    return found


def _rules() -> dict[str, Any]:
    return dict(yaml.safe_load(RULES.read_text()))


def _annotations() -> dict[str, dict[str, str]]:
    return {r["alert"]: r["annotations"] for g in _rules()["groups"] for r in g["rules"]
            if "alert" in r}


def _fires(alert: str, severity: str, value: str = "") -> list[dict[str, Any]]:
    notes = {k: v.replace("{{ $value }}", value) for k, v in _annotations()[alert].items()}
    return [{"exp_labels": {"severity": severity}, "exp_annotations": notes}]


def _hist(metric: str, buckets: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"series": f'{metric}_bucket{{le="{le}",pod="leader"}}', "values": v}
            for le, v in buckets]


def _case(name: str, interval: str, series: list[dict[str, str]], at: str,
          expect: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"name": name, "interval": interval, "input_series": series,
            "alert_rule_test": [{"eval_time": at, "alertname": a, "exp_alerts": e}
                                for a, e in expect.items()]}


# Counters: 0.1/s for two hours, then 0.3/s (5-minute samples).
TRIPLED = "0+30x24 720+90x24"
STEADY = "0+30x48"
# Histograms: 60 observations a minute, all slow or all fast.
SLOW_FILTER = [("0.01", "0+0x60"), ("0.1", "0+0x60"), ("0.25", "0+0x60"), ("0.5", "0+60x60"),
               ("+Inf", "0+60x60")]
FAST_FILTER = [(le, "0+60x60") for le, _ in SLOW_FILTER]
SLOW_PODS = [("10", "0+0x60"), ("60", "0+0x60"), ("300", "0+60x60"), ("+Inf", "0+60x60")]
FAST_PODS = [(le, "0+60x60") for le, _ in SLOW_PODS]
ALL = ("SharingAffinityUnreconstructableNotDecaying", "SharingAffinityLockConflictsWithoutReuse",
       "SharingAffinityNoKeysRising", "SharingAffinityFilterLatencyHigh",
       "DraAffinitySchedulerNoLeader", "DraAffinitySchedulerNotScraped", "DraAffinityPodsPendingLong",
       "DraAffinityFilterVerdictStale")


def _cases() -> list[dict[str, Any]]:
    quiet: dict[str, list[dict[str, Any]]] = {name: [] for name in ALL}  # what a healthy, scraped scheduler shows
    leader = [{"series": 'dra_affinity_leader{pod="a"}', "values": "1+0x144"},
              {"series": 'dra_affinity_leader{pod="b"}', "values": "0+0x144"}]
    return [
        _case("quarantined devices that do not drain", "5m", [
            *leader,
            {"series": 'sharing_affinity_unreconstructable_devices{pod="a"}', "values": "3+0x144"},
            {"series": 'sharing_affinity_unreconstructable_devices{pod="b"}', "values": "0+0x144"}],
            "12h", {**quiet, "SharingAffinityUnreconstructableNotDecaying": _fires(
                "SharingAffinityUnreconstructableNotDecaying", "warning", "3")}),
        _case("quarantined devices draining", "5m", [
            *leader,
            {"series": 'sharing_affinity_unreconstructable_devices{pod="a"}', "values": "3-0.02x144"}],
            "12h", quiet),
        _case("lock conflicts tripled while reuse stayed flat", "5m", [
            *leader,
            {"series": 'sharing_affinity_lock_conflict_total{pod="a"}', "values": TRIPLED},
            {"series": 'sharing_affinity_compatible_reuse_total{pod="a"}', "values": STEADY}],
            "3h", {**quiet, "SharingAffinityLockConflictsWithoutReuse": _fires(
                "SharingAffinityLockConflictsWithoutReuse", "warning")}),
        _case("lock conflicts and reuse rising together (more traffic)", "5m", [
            *leader,
            {"series": 'sharing_affinity_lock_conflict_total{pod="a"}', "values": TRIPLED},
            {"series": 'sharing_affinity_compatible_reuse_total{pod="a"}', "values": TRIPLED}],
            "3h", quiet),
        _case("claims extracting no keys three times as often", "5m", [
            *leader,
            {"series": 'sharing_affinity_no_keys_extracted_total{pod="a"}', "values": TRIPLED}],
            "3h", {**quiet, "SharingAffinityNoKeysRising": _fires(
                "SharingAffinityNoKeysRising", "warning")}),
        _case("no keys at a steady rate", "5m", [
            *leader,
            {"series": 'sharing_affinity_no_keys_extracted_total{pod="a"}', "values": STEADY}],
            "3h", quiet),
        _case("Filter p99 between 250 and 500 ms", "1m", [
            *leader, *_hist("sharing_affinity_filter_duration_seconds", SLOW_FILTER)],
            "50m", {**quiet, "SharingAffinityFilterLatencyHigh": _fires(
                "SharingAffinityFilterLatencyHigh", "warning")}),
        _case("Filter under 10 ms", "1m", [
            *leader, *_hist("sharing_affinity_filter_duration_seconds", FAST_FILTER)],
            "50m", quiet),
        _case("pods pending for minutes", "1m", [
            *leader, *_hist("dra_affinity_pod_scheduling_duration_seconds", SLOW_PODS)],
            "50m", {**quiet, "DraAffinityPodsPendingLong": _fires(
                "DraAffinityPodsPendingLong", "info")}),
        _case("pods bound within seconds", "1m", [
            *leader, *_hist("dra_affinity_pod_scheduling_duration_seconds", FAST_PODS)],
            "50m", quiet),
        _case("replicas scraped, none leading", "1m", [
            {"series": 'dra_affinity_leader{pod="a"}', "values": "0+0x30"},
            {"series": 'dra_affinity_leader{pod="b"}', "values": "0+0x30"}],
            "20m", {**quiet, "DraAffinitySchedulerNoLeader": _fires(
                "DraAffinitySchedulerNoLeader", "critical")}),
        _case("not scraped at all: a warning, never the critical page", "1m", [
            {"series": 'up{job="something-else"}', "values": "1+0x30"}],
            "20m", {**quiet, "DraAffinitySchedulerNotScraped": _fires(
                "DraAffinitySchedulerNotScraped", "warning")}),
        _case("one stale verdict on the leader", "1m", [
            *leader,
            {"series": 'dra_affinity_filter_stale_verdicts_total{pod="a"}', "values": "0+0x20 1+0x40"},
            {"series": 'dra_affinity_filter_stale_verdicts_total{pod="b"}', "values": "0+0x60"}],
            "30m", {**quiet, "DraAffinityFilterVerdictStale": _fires(
                "DraAffinityFilterVerdictStale", "info")}),
        _case("an hour after the stale verdict", "1m", [
            *leader,
            {"series": 'dra_affinity_filter_stale_verdicts_total{pod="a"}', "values": "0+0x20 1+0x100"}],
            "90m", quiet),
        _case("verdicts reused, none stale since a restart reset an old count", "1m", [
            *leader,
            {"series": 'dra_affinity_filter_verdicts_total{outcome="reused",pod="a"}',
             "values": "0+600x30 0+600x30"},
            {"series": 'dra_affinity_filter_stale_verdicts_total{pod="a"}', "values": "1+0x30 0+0x30"}],
            "50m", quiet),
        _case("a leader after a failover", "1m", [
            {"series": 'dra_affinity_leader{pod="a"}', "values": "1+0x10 0+0x20"},
            {"series": 'dra_affinity_leader{pod="b"}', "values": "0+0x10 1+0x20"}],
            "20m", quiet),
    ]


def test_the_plain_rules_and_the_prometheus_rule_are_the_same() -> None:
    operator = yaml.safe_load((MONITORING / "prometheus-rules.yaml").read_text())
    assert operator["kind"] == "PrometheusRule"
    assert operator["spec"] == _rules()
    assert set(_annotations()) == set(ALL), "every alert has cases here"


def test_promtool_checks_and_unit_tests_the_rules(tmp_path: Path) -> None:
    promtool = _promtool()
    operator = yaml.safe_load((MONITORING / "prometheus-rules.yaml").read_text())
    (tmp_path / "operator-rules.yaml").write_text(yaml.safe_dump(operator["spec"]))
    shutil.copy(RULES, tmp_path / "rules.yaml")
    check = subprocess.run([promtool, "check", "rules", "rules.yaml", "operator-rules.yaml"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    (tmp_path / "rules.test.yaml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": _cases()},
        sort_keys=False))
    run = subprocess.run([promtool, "test", "rules", "rules.test.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The harness can fail: the same cases with one expectation inverted."""
    promtool = _promtool()
    shutil.copy(RULES, tmp_path / "rules.yaml")
    case = _cases()[0]
    case["alert_rule_test"] = [t for t in case["alert_rule_test"]
                               if t["alertname"] == "SharingAffinityUnreconstructableNotDecaying"]
    case["alert_rule_test"][0]["exp_alerts"] = []
    (tmp_path / "rules.test.yaml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [case]}))
    run = subprocess.run([promtool, "test", "rules", "rules.test.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode != 0 and "SharingAffinityUnreconstructableNotDecaying" in run.stdout + run.stderr
