"""``metav1.LabelSelector`` as kube-scheduler evaluates it (``LabelSelectorAsSelector``).

A nil selector selects nothing and an empty one (``{}``) selects everything; both
facts matter to the plugins (topology spread counts no pod for either, while its
self-match sees the empty one match). ``matchLabels`` entries become ``=``
requirements; ``matchExpressions`` take ``In``, ``NotIn``, ``Exists`` and
``DoesNotExist`` with upstream's value rules. Selectors are frozen and hashable:
the incremental counts of :mod:`.index` are keyed by them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .errors import PlacementError

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
OPERATORS: Final = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN:
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == NOT_IN:
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == EXISTS:
            return self.key in labels
        return self.key not in labels  # DoesNotExist

    def __str__(self) -> str:
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return f"!{self.key}"
        vals = ",".join(sorted(self.values))
        if self.operator == IN and len(self.values) == 1:
            return f"{self.key}={vals}"
        return f"{self.key} {'in' if self.operator == IN else 'notin'} ({vals})"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements ANDed; ``nothing`` for a nil selector (matches no label set)."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def everything(self) -> bool:
        """Upstream's ``Selector.Empty()``: no requirement, so every label set matches."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def with_requirements(self, extra: Iterable[Requirement]) -> LabelSelector:
        """This selector with ``extra`` ANDed in (a nil selector stays nil, as upstream's
        merges leave a selector without requirements alone)."""
        if self.nothing:
            return self
        return LabelSelector(_sorted((*self.requirements, *extra)))

    def __str__(self) -> str:
        if self.nothing:
            return "<none>"
        return ",".join(str(r) for r in self.requirements) or "<all>"


NOTHING: Final = LabelSelector(nothing=True)
EVERYTHING: Final = LabelSelector()


def _sorted(reqs: Iterable[Requirement]) -> tuple[Requirement, ...]:
    """Requirements in upstream's order (by key), duplicates dropped: one canonical form,
    so equal selectors share one incremental count."""
    return tuple(sorted(dict.fromkeys(reqs), key=lambda r: (r.key, r.operator, sorted(r.values))))


def parse_label_selector(raw: Any, where: str) -> LabelSelector:
    """A ``metav1.LabelSelector`` (None: the nil selector); raises :class:`PlacementError`."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise PlacementError(where, "must be an object")
    unknown = set(raw) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise PlacementError(f"{where}.{sorted(unknown)[0]}", "unknown field")
    reqs: list[Requirement] = []
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise PlacementError(f"{where}.matchLabels", "must be an object")
    for k, v in labels.items():
        if not isinstance(v, str):
            raise PlacementError(f"{where}.matchLabels.{k}", "must be a string")
        reqs.append(Requirement(str(k), IN, frozenset((v,))))
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise PlacementError(f"{where}.matchExpressions", "must be a list")
    for i, e in enumerate(exprs):
        reqs.append(parse_requirement(e, f"{where}.matchExpressions[{i}]"))
    return LabelSelector(_sorted(reqs))


def parse_requirement(raw: Any, where: str) -> Requirement:
    if not isinstance(raw, Mapping):
        raise PlacementError(where, "must be an object")
    key, op, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str) or not key:
        raise PlacementError(f"{where}.key", "must be a non-empty string")
    if op not in OPERATORS:
        raise PlacementError(f"{where}.operator",
                             f"unsupported value {op!r}: one of {', '.join(OPERATORS)}")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise PlacementError(f"{where}.values", "must be a list of strings")
    if op in (IN, NOT_IN) and not values:
        raise PlacementError(f"{where}.values", f"must be non-empty when operator is {op}")
    if op in (EXISTS, DOES_NOT_EXIST) and values:
        raise PlacementError(f"{where}.values", f"must be empty when operator is {op}")
    return Requirement(key, str(op), frozenset(values))


def set_selector(labels: Mapping[str, str]) -> tuple[Requirement, ...]:
    """``labels.SelectorFromSet``: one ``=`` requirement per entry."""
    return tuple(Requirement(k, IN, frozenset((v,))) for k, v in labels.items())
