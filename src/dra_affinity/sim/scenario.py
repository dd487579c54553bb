"""Scenario files (SCENARIO.md): objects plus one ``kind: Scenario`` timeline.

Loading checks everything before anything runs: every document is a known,
valid object; names are unique; exactly one Scenario; every step has one
action with known keys of the right types; pods and objects a step names
exist by the time the step runs (in the file or created by an earlier
``apply``). Any problem is a :class:`ManifestError` naming the file, the
document and the field path, and nothing is simulated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictBool, ValidationError

from dra_affinity.api.io import (
    KINDS,
    Document,
    FieldError,
    ManifestError,
    parse_object,
    read_documents,
    read_text,
    validation_errors,
)
from dra_affinity.api.keys import key_of, namespaced_key, object_key
from dra_affinity.api.meta import K8sModel, ObjectMeta, TypedObject
from dra_affinity.features import UnknownGateError, check_names

SCENARIO_API_VERSION = "simulation.dra-affinity.io/v1alpha1"


def _known_gates(gates: dict[str, bool]) -> dict[str, bool]:
    """Unknown names are errors: a typo would silently do nothing."""
    unknown = check_names(gates)
    if unknown:
        raise ValueError(str(UnknownGateError(unknown[0])))
    return gates


# Feature gates by name, as on a component's --feature-gates (the names: dra_affinity.features).
Gates = Annotated[dict[str, StrictBool], AfterValidator(_known_gates)]


class FeatureGateSpec(K8sModel):
    apiserver: Gates = Field(default_factory=dict)
    scheduler: Gates = Field(default_factory=dict)


class Expect(K8sModel):
    """What a schedule step must produce."""

    result: Literal["Scheduled", "Unschedulable", "UnschedulableAndUnresolvable", "Error"] | None = None
    node: str | None = None
    devices: list[str] | None = None
    # Reason codes that must all appear among the step's reasons.
    reasons: list[str] | None = None


class ExpectDevice(K8sModel):
    device: str
    status: Literal["Clean", "Locked", "Unreconstructable"] | None = None
    lock: dict[str, str] | None = None
    claims: list[str] | None = None


class DeleteObject(K8sModel):
    kind: str
    name: str
    namespace: str | None = None


class Restart(K8sModel):
    feature_gates: Gates | None = None


class Step(K8sModel):
    schedule: str | None = None
    schedule_concurrently: list[str] | None = None
    delete: str | None = None
    apply: dict[str, Any] | None = None
    delete_object: DeleteObject | None = None
    restart: Restart | None = None
    apiserver_feature_gates: Gates | None = None
    expect_device: ExpectDevice | None = None
    # modifiers; on scheduleConcurrently a list gives one expectation per pod, in order
    expect: Expect | list[Expect] | None = None
    fail_bind: bool | None = None
    fail_prepare: bool | None = None

    @property
    def action(self) -> str:
        for name in _ACTIONS:
            if getattr(self, _ATTR[name]) is not None:
                return name
        return ""


_ACTIONS = ("schedule", "scheduleConcurrently", "delete", "apply", "deleteObject", "restart",
            "apiserverFeatureGates", "expectDevice")
_ATTR = {"schedule": "schedule", "scheduleConcurrently": "schedule_concurrently", "delete": "delete",
         "apply": "apply", "deleteObject": "delete_object", "restart": "restart",
         "apiserverFeatureGates": "apiserver_feature_gates", "expectDevice": "expect_device"}
_MODIFIERS = {"expect": ("schedule", "scheduleConcurrently"), "failBind": ("schedule",),
              "failPrepare": ("schedule",)}


class ScenarioSpec(K8sModel):
    feature_gates: FeatureGateSpec = Field(default_factory=FeatureGateSpec)
    steps: list[Step] = Field(default_factory=list)


class ScenarioObject(K8sModel):
    api_version: Literal["simulation.dra-affinity.io/v1alpha1"]
    kind: Literal["Scenario"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ScenarioSpec = Field(default_factory=ScenarioSpec)


@dataclass
class Scenario:
    source: str
    name: str
    objects: list[tuple[Document, TypedObject]]
    spec: ScenarioSpec
    step_objects: dict[int, TypedObject] = field(default_factory=dict)  # parsed `apply` payloads
    document: Document | None = None


def _obj_key(obj: TypedObject) -> tuple[str, str]:
    return (obj.kind, key_of(obj))


def load_scenario_text(text: str, source: str) -> Scenario:
    docs = read_documents(text, source)
    objects: list[tuple[Document, TypedObject]] = []
    scenario_docs: list[Document] = []
    seen: dict[tuple[str, str], int] = {}
    for d in docs:
        if isinstance(d.data, Mapping) and d.data.get("kind") == "Scenario":
            scenario_docs.append(d)
            continue
        obj = parse_object(d)
        assert isinstance(obj, TypedObject)
        k = _obj_key(obj)
        if k in seen:
            raise d.error([FieldError("metadata.name", f"Duplicate value: {obj.kind} {k[1]!r} is "
                                      f"already defined in document {seen[k]}")],
                          f"({obj.kind} {k[1]})")
        seen[k] = d.index
        objects.append((d, obj))
    if not scenario_docs:
        raise ManifestError(source, [FieldError("", "no `kind: Scenario` document",
                                                f"add one with apiVersion {SCENARIO_API_VERSION}")])
    if len(scenario_docs) > 1:
        d = scenario_docs[1]
        raise d.error([FieldError("kind", f"a file holds exactly one Scenario; document "
                                  f"{scenario_docs[0].index} is the first")], "(Scenario)")
    sdoc = scenario_docs[0]
    try:
        sobj = ScenarioObject.model_validate(sdoc.data)
    except ValidationError as e:
        raise sdoc.error(validation_errors(e, ScenarioObject),
                         f"(Scenario {_name(sdoc.data)})") from None
    sc = Scenario(source, sobj.metadata.name or "scenario", objects, sobj.spec, {}, sdoc)
    _check_steps(sc, sdoc, seen)
    return sc


def _name(data: Any) -> str:
    meta = data.get("metadata") if isinstance(data, Mapping) else None
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def _check_steps(sc: Scenario, sdoc: Document, seen: dict[tuple[str, str], int]) -> None:
    ref = f"(Scenario {sc.name})"
    known = set(seen)
    errors: list[FieldError] = []
    raw_steps = sdoc.data.get("spec", {}).get("steps", []) if isinstance(sdoc.data, Mapping) else []
    for i, step in enumerate(sc.spec.steps):
        path = f"spec.steps[{i}]"
        raw = raw_steps[i] if i < len(raw_steps) and isinstance(raw_steps[i], Mapping) else {}
        actions = [a for a in _ACTIONS if a in raw]
        if len(actions) != 1:
            errors.append(FieldError(path, "a step needs exactly one action" +
                                     (f", got {', '.join(actions)}" if actions else ""),
                                     "one of " + ", ".join(_ACTIONS)))
            continue
        action = actions[0]
        if step.fail_bind and step.fail_prepare:
            errors.append(FieldError(f"{path}.failPrepare",
                                     "Forbidden: failBind and failPrepare exclude each other "
                                     "(a failed bind never reaches NodePrepareResources)"))
        if isinstance(step.expect, list):
            pods = step.schedule_concurrently
            if action != "scheduleConcurrently":
                errors.append(FieldError(f"{path}.expect", "a list of expectations is only valid on "
                                         "scheduleConcurrently (one per pod)"))
            elif pods is not None and len(step.expect) != len(pods):
                errors.append(FieldError(f"{path}.expect", f"Invalid value: {len(step.expect)} "
                                         f"expectations for {len(pods)} pods"))
        for mod, allowed in _MODIFIERS.items():
            if mod in raw and action not in allowed:
                errors.append(FieldError(f"{path}.{mod}", f"only valid on {' or '.join(allowed)} steps"))
        if action in ("schedule", "delete"):
            target = getattr(step, action)
            if not target:
                errors.append(FieldError(f"{path}.{action}", "Required value: a pod name"))
            elif ("Pod", namespaced_key(target)) not in known:
                errors.append(FieldError(f"{path}.{action}", f"pod {namespaced_key(target)!r} is not defined "
                                         "in this file or by an earlier apply step"))
        elif action == "scheduleConcurrently":
            pods = step.schedule_concurrently or []
            if not pods:
                errors.append(FieldError(f"{path}.scheduleConcurrently", "Required value: pod names"))
            for j, p in enumerate(pods):
                if ("Pod", namespaced_key(p)) not in known:
                    errors.append(FieldError(f"{path}.scheduleConcurrently[{j}]",
                                             f"pod {namespaced_key(p)!r} is not defined"))
        elif action == "apply":
            d = Document(sc.source, sdoc.index, sdoc.line, step.apply)
            try:
                obj = parse_object(d)
            except ManifestError as e:
                for fe in e.errors:
                    errors.append(FieldError(f"{path}.apply" + (f".{fe.path}" if fe.path else ""),
                                             fe.message, fe.hint))
                continue
            assert isinstance(obj, TypedObject)
            sc.step_objects[i] = obj
            known.add(_obj_key(obj))
        elif action == "deleteObject":
            do = step.delete_object
            assert do is not None
            if (do.kind, "") not in {(k, "") for k in _kinds()}:
                errors.append(FieldError(f"{path}.deleteObject.kind", f"unsupported kind {do.kind!r}"))
                continue
            key = object_key(do.kind, do.name, do.namespace)
            if (do.kind, key) not in known:
                errors.append(FieldError(f"{path}.deleteObject", f"{do.kind} {key!r} is not defined "
                                         "in this file or by an earlier apply step"))
    if errors:
        raise sdoc.error(errors, ref)


def _kinds() -> list[str]:
    return [k for _, k in KINDS]


def load_scenario(path: str) -> Scenario:
    """A scenario file, read with the same bounds and errors as every manifest."""
    return load_scenario_text(read_text(path), path)
