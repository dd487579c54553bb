"""A pod's ``matchLabelKeys``/``mismatchLabelKeys`` merged into its selectors on create,
as the API server's pod strategy does, and through ``admit`` only on create."""

from __future__ import annotations

import copy
from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.scheduler.placement.terms import terms_of
from dra_affinity.validation import admit
from dra_affinity.validation.pod_strategy import merge_label_keys

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def pod(labels: dict[str, str], **spec: Any) -> Pod:
    return Pod.model_validate({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "x"}], **spec}})


def term(**extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST, **extra}


def anti(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def exprs(stored: Pod, kind: str = "podAntiAffinity",
          lst: str = "requiredDuringSchedulingIgnoredDuringExecution") -> list[dict[str, Any]]:
    entry = stored.spec.affinity[kind][lst][0]
    selector = (entry.get("podAffinityTerm") or entry)["labelSelector"]
    return list(selector.get("matchExpressions", []))


def test_affinity_keys_become_in_and_notin_requirements_with_the_pods_values() -> None:
    t = term(matchLabelKeys=["rev"], mismatchLabelKeys=["team"])
    p = pod({"app": "web", "rev": "2", "team": "a"}, affinity=anti(t))
    stored = merge_label_keys(p)
    assert p.spec.affinity == anti(t)  # the caller's object is not changed
    assert exprs(stored) == [{"key": "rev", "operator": "In", "values": ["2"]},
                             {"key": "team", "operator": "NotIn", "values": ["a"]}]
    (only,) = terms_of(stored).anti_affinity
    assert only.selector.matches({"app": "web", "rev": "2", "team": "b"})
    assert not only.selector.matches({"app": "web", "rev": "1", "team": "b"})
    assert not only.selector.matches({"app": "web", "rev": "2", "team": "a"})


def test_preferred_terms_are_merged_inside_their_pod_affinity_term() -> None:
    aff = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "podAffinityTerm": term(matchLabelKeys=["rev"])}]}}
    stored = merge_label_keys(pod({"rev": "7"}, affinity=aff))
    assert exprs(stored, "podAffinity", "preferredDuringSchedulingIgnoredDuringExecution") == [
        {"key": "rev", "operator": "In", "values": ["7"]}]


def test_spread_keys_become_in_requirements_only() -> None:
    c = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]}
    stored = merge_label_keys(pod({"app": "web", "pod-template-hash": "abc"}, topologySpreadConstraints=[c]))
    (merged,) = stored.spec.topology_spread_constraints
    assert merged["labelSelector"]["matchExpressions"] == [
        {"key": "pod-template-hash", "operator": "In", "values": ["abc"]}]


def test_keys_the_pod_lacks_and_terms_without_a_selector_are_left_alone() -> None:
    no_selector = {"topologyKey": HOST, "matchLabelKeys": ["rev"]}
    p = pod({"app": "web"}, affinity=anti(term(matchLabelKeys=["rev"]), no_selector))
    assert merge_label_keys(p) is p  # nothing to merge: the same object


def test_a_pod_without_pod_affinity_or_spread_is_returned_as_it_is() -> None:
    p = pod({"rev": "1"}, affinity={"nodeAffinity": {}})
    assert merge_label_keys(p) is p


def test_admit_merges_on_create_and_not_on_update() -> None:
    p = pod({"app": "web", "rev": "2"}, affinity=anti(term(matchLabelKeys=["rev"])))
    before = copy.deepcopy(p.to_dict())
    created = admit(p)
    assert created.ok and isinstance(created.object, Pod)
    assert exprs(created.object) == [{"key": "rev", "operator": "In", "values": ["2"]}]
    assert p.to_dict() == before  # the input is never mutated
    handed_over = admit(p, copy=False)
    assert handed_over.ok and isinstance(handed_over.object, Pod)
    assert exprs(handed_over.object) == exprs(created.object)
    assert p.to_dict() == before  # not even when handed over
    updated = admit(p, created.object)
    assert updated.ok and isinstance(updated.object, Pod)
    assert exprs(updated.object) == []  # an update is stored as sent
