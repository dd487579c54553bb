"""Runs a scenario against the embedded cluster and builds the SCENARIO.md output.

The output is a plain dict with only deterministic content (no times, no
random IDs), so the same file always prints the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dra_affinity.api.io import FieldError, ManifestError
from dra_affinity.api.keys import key_of, namespaced_key, object_key
from dra_affinity.api.meta import TypedObject
from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.observe.metrics import SchedulerMetrics
from dra_affinity.scheduler.locks import listed_devices
from dra_affinity.scheduler.scheduler import Attempt, Scheduler
from dra_affinity.sim.cluster import Cluster, WriteResult
from dra_affinity.sim.faults import Failure, Fault, FaultInjectingView
from dra_affinity.sim.scenario import Expect, ExpectDevice, Scenario, Step
from dra_affinity.structured.model import Result
from dra_affinity.structured.state import AffinityStatus


@dataclass
class Simulation:
    """A scenario being run: cluster, scheduler and the output so far.

    The scheduler sees the cluster through :attr:`view`, which fails the writes a
    step asks to fail (``failBind``); ``failPrepare`` is the node's kubelet failing
    after the bind, as a real one reports it (an event)."""

    scenario: Scenario
    scoring: str = "firstfit"
    cluster: Cluster = field(init=False)
    view: FaultInjectingView = field(init=False)
    scheduler: Scheduler = field(init=False)
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)
    recorder: Recorder = field(default_factory=Recorder)
    steps: list[dict[str, Any]] = field(default_factory=list)
    failed: int = 0
    features: Features = field(init=False)
    warnings: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        gates = self.scenario.spec.feature_gates
        self.features = Features.parse(gates.apiserver, gates.scheduler)
        self.cluster = Cluster(self.features)
        self.view = FaultInjectingView(self.cluster)
        self._apply_initial()
        self.scheduler = self._new_scheduler()
        self.scheduler.start()

    def _new_scheduler(self) -> Scheduler:
        return Scheduler(self.view, self.features,
                         metrics=self.metrics, recorder=self.recorder, scoring=self.scoring)

    def _apply_initial(self) -> None:
        for doc, obj in self.scenario.objects:
            res = self.cluster.apply(obj)
            if not res.applied:
                raise ManifestError(doc.source, res.errors or [FieldError("", "rejected")],
                                    doc.index, doc.line, f"({obj.kind} {obj.metadata.name})",
                                    ["rejected by the API server"])
            for w in res.warnings:
                # e.g. sharingAffinity dropped because the API server gate is off
                self.warnings.append({"object": f"{obj.kind} {obj.metadata.name}",
                                      "document": str(doc.index), "warning": w})

    # ------------------------------------------------------------------ steps
    def run(self, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        for i, step in enumerate(self.scenario.spec.steps):
            self.run_step(i, step)
            if progress is not None:
                progress(i)
        return self.output()

    def run_step(self, i: int, step: Step) -> None:
        action = step.action
        if action == "schedule":
            assert step.schedule is not None
            key = namespaced_key(step.schedule)
            self.cluster.sync_template_claims(key)
            if step.fail_bind:
                # Reserve and PreBind succeed; the API server refuses the binding.
                self.view.fail("bind", key, Failure(Fault.CONFLICT))
            a = self.scheduler.schedule(key)
            if step.fail_prepare and a.node is not None:
                self._prepare_failed(key, a.node)
            exp = step.expect if not isinstance(step.expect, list) else None
            self.steps.append(self._attempt_entry(i, "schedule", a, exp))
        elif action == "scheduleConcurrently":
            pods = [namespaced_key(p) for p in step.schedule_concurrently or []]
            for p in pods:
                self.cluster.sync_template_claims(p)
            many = step.expect
            for j, a in enumerate(self.scheduler.schedule_concurrently(pods)):
                e = many[j] if isinstance(many, list) else many
                self.steps.append(self._attempt_entry(i, "scheduleConcurrently", a, e))
        elif action == "delete":
            assert step.delete is not None
            key = namespaced_key(step.delete)
            gone = self.cluster.delete("Pod", key)
            self.steps.append({"index": i, "action": "delete", "pod": key,
                               "result": "Deleted" if gone is not None else "NotFound"})
        elif action == "apply":
            obj = self.scenario.step_objects[i]
            res = self.cluster.apply(obj)
            self.steps.append(self._apply_entry(i, obj, res))
        elif action == "deleteObject":
            do = step.delete_object
            assert do is not None
            key = object_key(do.kind, do.name, do.namespace)
            gone = self.cluster.delete(do.kind, key)
            self.steps.append({"index": i, "action": "deleteObject", "object": f"{do.kind} {key}",
                               "result": "Deleted" if gone is not None else "NotFound"})
        elif action == "restart":
            assert step.restart is not None
            if step.restart.feature_gates is not None:
                self.features = self.features.with_gates("scheduler", step.restart.feature_gates)
            self.scheduler.stop()
            self.scheduler = self._new_scheduler()
            self.scheduler.start()
            self.steps.append({"index": i, "action": "restart", "result": "Restarted",
                               "featureGates": self.features.gates("scheduler")})
        elif action == "apiserverFeatureGates":
            assert step.apiserver_feature_gates is not None
            self.features = self.features.with_gates("apiserver", step.apiserver_feature_gates)
            self.cluster.features = self.features
            self.steps.append({"index": i, "action": "apiserverFeatureGates", "result": "Updated",
                               "featureGates": self.features.gates("apiserver")})
        elif action == "expectDevice":
            assert step.expect_device is not None
            exps = self._check_device(step.expect_device)
            ok = all(e["ok"] for e in exps)
            self.steps.append({"index": i, "action": "expectDevice",
                               "device": step.expect_device.device,
                               "result": "Passed" if ok else "Failed", "expectations": exps})

    def _prepare_failed(self, key: str, node: str) -> None:
        """The node's kubelet could not prepare the pod's devices: it says so in an event;
        the claims stay allocated (their locks with them) until they are deallocated."""
        self.recorder.event(f"Pod {key}", "Warning", "FailedPrepareDynamicResources",
                            f"NodePrepareResources failed on node {node}; the allocation and "
                            "affinity locks stay until the claims are deallocated")

    # ------------------------------------------------------------------ entries
    def _attempt_entry(self, i: int, action: str, a: Attempt, expect: Expect | None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "index": i, "action": action, "pod": a.pod, "result": a.result.value, "node": a.node,
            "allocations": a.allocations, "reasons": [r.as_dict() for r in a.reasons],
            "message": a.message,
        }
        entry["expectations"] = self._check_attempt(a, expect) if expect is not None else []
        return entry

    def _apply_entry(self, i: int, obj: TypedObject, res: WriteResult) -> dict[str, Any]:
        name = key_of(obj)
        return {"index": i, "action": "apply", "object": f"{obj.kind} {name}", "result": res.result,
                "errors": [{"field": e.path, "message": e.message} for e in res.errors],
                "warnings": list(res.warnings)}

    def _expect(self, ok: bool, message: str) -> dict[str, Any]:
        if not ok:
            self.failed += 1
        return {"ok": ok, "message": message}

    def _check_attempt(self, a: Attempt, e: Expect) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if e.result is not None:
            out.append(self._expect(a.result.value == e.result,
                                    f"result: expected {e.result}, got {a.result.value}"))
        if e.node is not None:
            out.append(self._expect(a.node == e.node, f"node: expected {e.node}, got {a.node}"))
        if e.devices is not None:
            got = [row["device"] for row in a.allocations]
            out.append(self._expect(got == e.devices, f"devices: expected {e.devices}, got {got}"))
        if e.reasons is not None:
            codes = [r.code for r in a.reasons]
            missing = [c for c in e.reasons if c not in codes]
            out.append(self._expect(not missing, f"reasons: expected {e.reasons} among "
                                    f"{sorted(set(codes))}" + (f", missing {missing}" if missing else "")))
        return out

    def _check_device(self, e: ExpectDevice) -> list[dict[str, Any]]:
        status, lock, claims = self.device_view(e.device)
        out: list[dict[str, Any]] = []
        if e.device not in self.scheduler.snapshot().devices and not claims:
            # A typo in a device ID must not pass as "Clean".
            return [self._expect(False, f"{e.device}: no such device in any published slice")]
        if e.status is not None:
            out.append(self._expect(status == e.status,
                                    f"{e.device} status: expected {e.status}, got {status}"))
        if e.lock is not None:
            out.append(self._expect(lock == e.lock, f"{e.device} lock: expected {e.lock}, got {lock}"))
        if e.claims is not None:
            want = sorted(namespaced_key(c) for c in e.claims)
            out.append(self._expect(claims == want, f"{e.device} claims: expected {want}, got {claims}"))
        return out

    # ------------------------------------------------------------------ views
    def device_view(self, device: str) -> tuple[str, dict[str, str], list[str]]:
        st = self.scheduler.state.affinity(device)
        claims = sorted({s.claim for s in self.scheduler.state.shares(device)})
        lock = st.lock_dict() if st.status is AffinityStatus.LOCKED else {}
        return st.status.label, lock, claims

    def devices_output(self) -> list[dict[str, Any]]:
        out = []
        for did in listed_devices(self.scheduler):
            status, lock, claims = self.device_view(did)
            entry: dict[str, Any] = {"device": did, "status": status, "lock": lock, "claims": claims,
                                     "holders": [{"claim": sh.claim, "request": sh.request}
                                                 for sh in self.scheduler.state.shares(did)]}
            st = self.scheduler.state.affinity(did)
            if st.status is AffinityStatus.UNRECONSTRUCTABLE and st.reason:
                entry["reason"] = st.reason
            out.append(entry)
        return out

    def output(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "steps": self.steps,
            "devices": self.devices_output(),
            "metrics": self.metrics.values(),
            "events": [e.as_dict() for e in self.recorder.events],
            "logs": list(self.recorder.logs),
            "warnings": list(self.warnings),
            "expectationsFailed": self.failed,
        }


def simulate(scenario: Scenario, scoring: str = "firstfit",
             progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    return Simulation(scenario, scoring).run(progress)


__all__ = ["Result", "Simulation", "simulate"]
