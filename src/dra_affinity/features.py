"""Feature gates: every gate, the components that read it, and its default, in one table.

Kubernetes passes one ``Features`` value into its structured allocator instead of
reading global gates; so does this project. A gate's name is spelled only in
:data:`GATES`: components receive a :class:`Features` value, parsed once from
``name -> bool`` mappings (a scenario file, command-line flags), and read typed
attributes. An unknown name is an error, never silently ignored: a typo in a
gate would otherwise turn a rollback into a no-op.

Two components read gates:

* ``apiserver``: whether ``spec.sharingAffinity`` is stored (drop-on-disable);
* ``scheduler``: whether the sharing-affinity gate is enforced, and the
  experiments (KEP-5981 "Future Enhancements"), which are off unless asked for
  and live outside the stable allocator path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Component = Literal["apiserver", "scheduler"]
COMPONENTS: tuple[Component, ...] = ("apiserver", "scheduler")


@dataclass(frozen=True)
class Gate:
    """One feature gate: its name as users write it and the attribute it sets."""

    name: str
    attribute: str  # attribute of Features
    component: Component
    default: bool
    stage: Literal["Alpha", "Experiment"]
    summary: str


GATES: tuple[Gate, ...] = (
    Gate("DRASharingAffinity", "apiserver_sharing_affinity", "apiserver", True, "Alpha",
         "store spec.sharingAffinity of ResourceSlices (dropped on write while off, "
         "unless the slice already had it)"),
    Gate("DRASharingAffinity", "sharing_affinity", "scheduler", True, "Alpha",
         "enforce sharing affinity: filter devices by lock, record locks, rebuild them on restart"),
    Gate("DRASharingAffinityNeverSetLock", "never_set_lock", "scheduler", False, "Experiment",
         "claims annotated NeverSetLock only join devices already locked to their keys"),
    Gate("DRASharingAffinityPreferredKeys", "preferred_keys", "scheduler", False, "Experiment",
         "extractors a metadata slice marks preferred filter nothing and set no lock; "
         "they only order devices"),
)

# Names a component accepts. The scheduler's experiments are accepted (and ignored)
# by the API server too, so one gate map can be handed to both, as with
# kube-apiserver's and kube-scheduler's shared --feature-gates vocabulary.
GATE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(g.name for g in GATES))


class UnknownGateError(ValueError):
    """A gate name no component knows."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown feature gate {name!r} (known: {', '.join(GATE_NAMES)})")
        self.name = name


def _gate(component: Component, name: str) -> Gate | None:
    for g in GATES:
        if g.component == component and g.name == name:
            return g
    return None


@dataclass(frozen=True)
class Features:
    """Every gate's value. Defaults are the table's; build with :meth:`parse`."""

    apiserver_sharing_affinity: bool = True
    sharing_affinity: bool = True
    never_set_lock: bool = False
    preferred_keys: bool = False

    @classmethod
    def parse(cls, apiserver: Mapping[str, bool] | None = None,
              scheduler: Mapping[str, bool] | None = None) -> Features:
        """Features from per-component ``name -> bool`` maps; raises UnknownGateError."""
        return cls().with_gates("apiserver", apiserver or {}).with_gates("scheduler", scheduler or {})

    def with_gates(self, component: Component, gates: Mapping[str, bool]) -> Features:
        """A copy with ``gates`` of ``component`` set (the rest unchanged)."""
        changes: dict[str, bool] = {}
        for name, value in gates.items():
            if name not in GATE_NAMES:
                raise UnknownGateError(name)
            g = _gate(component, name)
            if g is not None:
                changes[g.attribute] = bool(value)
        return dataclasses.replace(self, **changes) if changes else self

    def gates(self, component: Component) -> dict[str, bool]:
        """The component's gates as users write them: alpha gates always, experiments
        only when on (what a report of the component's configuration shows)."""
        out: dict[str, bool] = {}
        for g in GATES:
            if g.component != component:
                continue
            value = bool(getattr(self, g.attribute))
            if g.stage == "Alpha" or value != g.default:
                out[g.name] = value
        return out


def name_of(attribute: str) -> str:
    """The gate name users write for a :class:`Features` attribute (for messages)."""
    for g in GATES:
        if g.attribute == attribute:
            return g.name
    raise KeyError(attribute)


def check_names(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that are not gates (for input validation)."""
    return [n for n in names if n not in GATE_NAMES]
