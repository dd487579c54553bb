"""deploy/affinity-pools.yaml enforced by a real kube-apiserver.

The policies are applied as shipped, once for the module; only their bindings are
narrowed to the namespaces the tests label (the control plane is shared by every cluster
test). Each case is a pod the
server admits or refuses: tolerations by key and by an empty key with ``Exists``,
updates that add a toleration, pods using claim templates and named claims of the
class, and the pods the policies must leave alone.
"""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from dra_affinity.kube.api import ApiError
from kube.live import Live, deploy_docs, live, ns, wait_until

pytestmark = pytest.mark.cluster
_FIXTURES = (live, ns)

TAINT = "dra-affinity.io/affinity-pools"
CLASS = "shared-nic"
SELECTED = "dra-affinity.io/admission-policy-test"  # the label the bindings select
REFUSED_TOLERATION = "only pods with schedulerName dra-affinity may use resource claims"
_names = itertools.count()


def _pod(ns: str, *, scheduler: str = "default-scheduler", claims: list[dict[str, str]] | None,
         tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    if claims:
        spec["resourceClaims"] = claims
        spec["containers"][0]["resources"] = {"claims": [{"name": c["name"]} for c in claims]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    # Never placed: the node selector matches no node, so the stock scheduler leaves it.
    spec["nodeSelector"] = {"dra-affinity.io/test": "none"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{next(_names)}", "namespace": ns}, "spec": spec}


def _create(live: Live, pod: dict[str, Any]) -> str | None:
    """Create the pod; None when admitted, else the server's message."""
    try:
        live.create(pod)
    except ApiError as e:
        assert e.status == 422, e  # a policy without a reason denies as Invalid
        return e.message or str(e)
    return None


CLAIM = [{"name": "nic", "resourceClaimName": "some-claim"}]


def _requests(klass: str, *, first_available: bool = False) -> dict[str, Any]:
    if first_available:
        return {"requests": [{"name": "nic", "firstAvailable": [
            {"name": "other", "deviceClassName": "plain-nic"},
            {"name": "shared", "deviceClassName": klass}]}]}
    return {"requests": [{"name": "nic", "exactly": {"deviceClassName": klass}}]}


def _template(live: Live, ns: str, name: str, devices: dict[str, Any]) -> None:
    live.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": name, "namespace": ns}, "spec": {"spec": {"devices": devices}}})


def _claim(live: Live, ns: str, name: str, devices: dict[str, Any]) -> None:
    live.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": name, "namespace": ns}, "spec": {"devices": devices}})


def _type_checked(live: Live, name: str) -> dict[str, Any] | None:
    """The policy's status once the server has type-checked its current generation."""
    policy = live.get("ValidatingAdmissionPolicy", "admissionregistration.k8s.io/v1", name)
    assert policy is not None
    status: dict[str, Any] = policy.get("status") or {}
    if status.get("observedGeneration") != policy["metadata"]["generation"] or \
            "typeChecking" not in status:
        return None
    return status


@pytest.fixture(scope="module")
def bound(control_plane: Any) -> Iterator[None]:
    """The policies and their bindings, applied once for the module.

    The bindings select only namespaces carrying the label ``SELECTED``, since the control
    plane is shared by every cluster test. They are deleted only at the module's end, never
    between tests: a kube-apiserver stops watching a built-in paramKind (here
    ResourceClaimTemplate and ResourceClaim) once no binding names it for about a second,
    and does not start again when a binding comes back (kubernetes/kubernetes#130887), so
    re-created bindings would see none of the templates and claims created after.
    """
    live = Live(control_plane.client)
    docs = deploy_docs("affinity-pools.yaml")
    kinds = [d["kind"] for d in docs]
    assert kinds.count("ValidatingAdmissionPolicy") == kinds.count(
        "ValidatingAdmissionPolicyBinding") == 3
    bindings = []
    try:
        for doc in docs:
            doc = copy.deepcopy(doc)
            if doc["kind"] == "ValidatingAdmissionPolicyBinding":
                doc["spec"]["matchResources"] = {"namespaceSelector": {
                    "matchLabels": {SELECTED: "true"}}}
                bindings.append(doc["metadata"]["name"])
            live.apply(doc)
        # the server type-checks each expression against the schemas of pods and params: a
        # misspelt field is a warning in the status, not an error at apply
        for name in (d["metadata"]["name"] for d in docs
                     if d["kind"] == "ValidatingAdmissionPolicy"):
            status = wait_until(functools.partial(_type_checked, live, name), 30,
                                f"policy {name} type-checked")
            assert not status["typeChecking"].get("expressionWarnings"), status
        yield
    finally:
        for name in bindings:
            live.api.request("DELETE", "/apis/admissionregistration.k8s.io/v1/"
                             f"validatingadmissionpolicybindings/{name}")


def _refused_with(live: Live, pod: dict[str, Any], expected: str) -> bool:
    """Whether the server refuses the pod with ``expected``; a refusal for another reason
    fails at once (a pod that was admitted is not a failure: the policies may not be
    loaded yet)."""
    message = _create(live, pod)
    if message is None:
        return False
    assert expected in message, message
    return True


def in_force(live: Live, ns: str) -> None:
    """The policies (``bound``) in force for pods of ``ns``: the namespace is labelled so
    the bindings select it, then probed until a pod tolerating the taint, one using a
    template and one using a claim of the class are refused (the server loads bindings and
    their params asynchronously)."""
    live.api.request("PATCH", f"/api/v1/namespaces/{ns}",
                     content_type="application/merge-patch+json",
                     body={"metadata": {"labels": {SELECTED: "true"}}})
    _template(live, ns, "probe", _requests(CLASS))
    _claim(live, ns, "probe", _requests(CLASS))
    probes: list[tuple[dict[str, Any], str]] = [
        ({"tolerations": [{"key": TAINT}], "claims": CLAIM}, REFUSED_TOLERATION),
        ({"claims": [{"name": "nic", "resourceClaimTemplateName": "probe"}]},
         f"ResourceClaimTemplate probe asks for DeviceClass {CLASS}"),
        ({"claims": [{"name": "nic", "resourceClaimName": "probe"}]},
         f"ResourceClaim probe asks for DeviceClass {CLASS}")]
    for probe, expected in probes:
        wait_until(lambda: _refused_with(live, _pod(ns, **probe), expected),  # noqa: B023
                   60, f"the policies in force: {probe} refused")


@pytest.fixture
def policies(live: Live, ns: str, bound: None) -> None:
    in_force(live, ns)


@pytest.mark.parametrize("toleration", [
    {"key": TAINT, "operator": "Exists"},
    {"key": TAINT, "operator": "Equal", "value": "true", "effect": "NoSchedule"},
    {"key": TAINT, "operator": "Equal", "value": "other", "effect": "NoExecute"},
    {"operator": "Exists"},                          # tolerates every taint
    {"operator": "Exists", "effect": "NoSchedule"},  # every NoSchedule taint
    {"key": "", "operator": "Exists"},
], ids=["key-exists", "key-equal", "key-other-value", "exists", "exists-noschedule", "empty-key"])
def test_toleration_of_the_taint_refused(live: Live, ns: str, policies: None,
                                         toleration: dict[str, Any]) -> None:
    message = _create(live, _pod(ns, claims=CLAIM, tolerations=[
        {"key": "other", "operator": "Exists"}, toleration]))
    assert message is not None and REFUSED_TOLERATION in message
    assert "dra-affinity-pools" in message  # the server names the policy


def test_pods_the_policy_leaves_alone(live: Live, ns: str, policies: None) -> None:
    everything = [{"operator": "Exists"}]
    # dra-affinity's own pods may tolerate it (they need not: it is implicit)
    assert _create(live, _pod(ns, scheduler="dra-affinity", claims=CLAIM,
                              tolerations=everything)) is None
    # a pod without claims allocates nothing: a DaemonSet that tolerates everything
    assert _create(live, _pod(ns, claims=None, tolerations=everything)) is None
    # other tolerations, and none
    assert _create(live, _pod(ns, claims=CLAIM, tolerations=[
        {"key": "other", "operator": "Exists"},
        {"key": f"{TAINT}-not", "operator": "Exists"}])) is None
    assert _create(live, _pod(ns, claims=CLAIM)) is None


def test_update_that_adds_the_toleration_refused(live: Live, ns: str, policies: None) -> None:
    pod = _pod(ns, claims=CLAIM, tolerations=[{"key": "other", "operator": "Exists"}])
    assert _create(live, pod) is None
    path = f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}"
    patch = "application/json-patch+json"
    for added in ({"operator": "Exists"}, {"key": TAINT, "operator": "Exists"}):
        with pytest.raises(ApiError) as refused:
            live.api.request("PATCH", path, content_type=patch, body=[
                {"op": "add", "path": "/spec/tolerations/-", "value": added}])
        assert refused.value.status == 422
        assert REFUSED_TOLERATION in refused.value.message
    # another toleration may be added
    live.api.request("PATCH", path, content_type=patch, body=[
        {"op": "add", "path": "/spec/tolerations/-", "value": {"key": "b", "operator": "Exists"}}])
    got = live.pod(ns, pod["metadata"]["name"])
    assert got is not None
    keys = [t["key"] for t in got["spec"]["tolerations"]]  # DefaultTolerationSeconds adds two
    assert keys[0] == "other" and keys[-1] == "b" and TAINT not in keys


def test_update_keeps_a_toleration_the_pod_already_had(live: Live, ns: str,
                                                       bound: None) -> None:
    """A pod admitted before the policies can still be updated (labels, say); it cannot
    gain a second toleration of the taint."""
    legacy = _pod(ns, claims=CLAIM, tolerations=[{"operator": "Exists"}])
    live.create(legacy)
    in_force(live, ns)  # after the pod
    path = f"/api/v1/namespaces/{ns}/pods/{legacy['metadata']['name']}"
    live.api.request("PATCH", path, content_type="application/merge-patch+json",
                     body={"metadata": {"labels": {"touched": "yes"}}})
    with pytest.raises(ApiError) as refused:
        live.api.request("PATCH", path, content_type="application/json-patch+json", body=[
            {"op": "add", "path": "/spec/tolerations/-",
             "value": {"key": TAINT, "operator": "Exists"}}])
    assert REFUSED_TOLERATION in refused.value.message


def test_claims_from_templates_of_the_class(live: Live, ns: str, policies: None) -> None:
    _template(live, ns, "shared", _requests(CLASS))
    _template(live, ns, "shared-sub", _requests(CLASS, first_available=True))
    _template(live, ns, "plain", _requests("plain-nic"))
    _template(live, ns, "empty", {})

    def uses(*templates: str, scheduler: str = "default-scheduler") -> str | None:
        return _create(live, _pod(ns, scheduler=scheduler, claims=[
            {"name": f"c{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]))

    for template in ("shared", "shared-sub"):
        message = uses("plain", template)
        assert message is not None
        assert f"ResourceClaimTemplate {template} asks for DeviceClass {CLASS}" in message
    assert uses("plain", "empty") is None
    assert uses("missing") is None  # checked when created; the taint still applies
    assert uses("shared", "shared-sub", scheduler="dra-affinity") is None


def test_named_claims_of_the_class(live: Live, ns: str, policies: None) -> None:
    _claim(live, ns, "shared", _requests(CLASS))
    _claim(live, ns, "shared-sub", _requests(CLASS, first_available=True))
    _claim(live, ns, "plain", _requests("plain-nic"))
    _claim(live, ns, "empty", {})

    def uses(claim: str, scheduler: str = "default-scheduler") -> str | None:
        return _create(live, _pod(ns, scheduler=scheduler,
                                  claims=[{"name": "nic", "resourceClaimName": claim}]))

    for claim in ("shared", "shared-sub"):
        message = uses(claim)
        assert message is not None
        assert f"ResourceClaim {claim} asks for DeviceClass {CLASS}" in message
    assert uses("plain") is None
    assert uses("empty") is None
    assert uses("shared", scheduler="dra-affinity") is None
