"""Extraction outcomes are remembered across attempts by claim identity.

A claim's spec is immutable, so what its configs extract under one extractor set
and one DeviceClass config never changes: a pod that keeps failing (no keys, a
CEL error, a cost overrun) costs its CEL budget once, not on every retry."""

from __future__ import annotations

from builders import Env, claim, device_slice, meta_slice, nic_class, nic_params, pod
from dra_affinity.observe.metrics import EVALUATIONS
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result

# Runtime error on claim data: an authoring error of the slice, the attempt ends.
FAILING = 'object.subnetID.size() > 0 ? string(int(object.subnetID)) : ""'


def codes(attempt: object) -> list[str]:
    return [r.code for r in attempt.reasons]  # type: ignore[attr-defined]


def env_with(extractors: dict[str, str] | None = None, *objs: object) -> Env:
    return Env(nic_class(), meta_slice("node-1", extractors), device_slice("node-1", ["eth1"]), *objs)


def test_no_keys_retried_costs_one_evaluation() -> None:
    env = env_with()
    env.add_pod("a", nic_params(subnet=""))
    first = env.schedule("a")
    assert codes(first) == [reasons.AFFINITY_NO_KEYS]
    spent = env.metric(EVALUATIONS)
    assert spent >= 1
    for _ in range(5):
        again = env.schedule("a")
        assert again.result is Result.UNSCHEDULABLE and codes(again) == [reasons.AFFINITY_NO_KEYS]
        assert again.message == first.message
    assert env.metric(EVALUATIONS) == spent


def test_cel_error_retried_costs_one_evaluation() -> None:
    env = env_with({"subnet": FAILING})
    env.add_pod("a", nic_params(subnet="not-a-number"))
    first = env.schedule("a")
    assert first.result is Result.ERROR and codes(first) == [reasons.AFFINITY_CEL_ERROR]
    spent = env.metric(EVALUATIONS)
    assert spent >= 1
    assert env.schedule("a").reasons == first.reasons
    assert env.metric(EVALUATIONS) == spent


def test_each_claim_is_evaluated_once_however_alike() -> None:
    """Identity, not content: two claims with equal failing configs are two evaluations
    (their messages name different claims)."""
    env = env_with()
    env.add_pod("a", nic_params(subnet=""))
    env.add_pod("b", nic_params(subnet=""))
    env.schedule("a")
    one = env.metric(EVALUATIONS)
    env.schedule("b")
    assert env.metric(EVALUATIONS) == 2 * one
    env.schedule("a")
    env.schedule("b")
    assert env.metric(EVALUATIONS) == 2 * one


def test_class_config_change_is_evaluated_again() -> None:
    """The class's configs are in scope: a new class generation is a new outcome."""
    env = env_with()
    env.add_pod("a", None)  # the claim has no config of its own
    assert codes(env.schedule("a")) == [reasons.AFFINITY_NO_KEYS]
    spent = env.metric(EVALUATIONS)
    env.apply(nic_class(config=[nic_params()]))
    a = env.schedule("a")
    assert a.result is Result.SCHEDULED, a.message
    assert env.metric(EVALUATIONS) > spent


def test_restart_evaluates_again() -> None:
    """The memo lives as long as the scheduler: a restarted one knows nothing."""
    env = env_with()
    env.add_pod("a", nic_params(subnet=""))
    env.schedule("a")
    spent = env.metric(EVALUATIONS)
    env.restart()
    env.schedule("a")
    assert env.metric(EVALUATIONS) > spent


def test_claim_and_pod_objects_are_plain() -> None:
    """Guards the builders this file relies on (a pod of one claim, in namespace default)."""
    c = claim("x", nic_params())
    p = pod("x", ["x"])
    assert c.metadata.name == "x" and p.spec.resource_claims[0].resource_claim_name == "x"
