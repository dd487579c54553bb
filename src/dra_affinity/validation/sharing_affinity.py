"""A slice's sharing-affinity extractors as the scheduler reads them: field or annotation.

KEP-5981 puts the extractors in ``spec.sharingAffinity`` of a pool's metadata
slice. No released API server stores that field (it drops it as unknown), so a
driver can publish the same JSON list in the annotation
:data:`SHARING_AFFINITY_ANNOTATION` of the device-less metadata slice instead.
:func:`slice_extractors` is the one place that turns a slice, as an API server
stores it, into the extractors the scheduler uses, with one set of validation
errors. Every consumer calls it: the live scheduler (on each slice it reads),
the simulator's cluster (on each slice it serves), and the ``validate``,
``eval``, ``simulate``, ``explain`` and ``locks`` commands.

The annotation is checked with the admission rules of the field (names, at most
8 entries, CEL that compiles and returns string, combined cost, no ``devices``
in the slice). An annotation that does not parse or validate, or one that
disagrees with the field when both are set, is an error: the slice then
carries no extractors and its pool is invalid for sharing affinity (it fails
closed), since the extractors the driver meant cannot be known. A field alone
is taken as served: the API server that stored it validated it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from dra_affinity.api.io import FieldError, validation_errors
from dra_affinity.api.resource import ResourceSlice, SharingAffinityExtractor
from dra_affinity.validation._errors import Path, forbidden, invalid
from dra_affinity.validation.slices import validate_sharing_affinity

__all__ = [
    "ANNOTATION_PATH",
    "SHARING_AFFINITY_ANNOTATION",
    "EffectiveSlices",
    "SliceExtractors",
    "effective_slices",
    "slice_extractors",
]

#: The annotation of a pool's device-less metadata slice that carries the
#: ``spec.sharingAffinity`` list as JSON, for API servers that do not store the field.
SHARING_AFFINITY_ANNOTATION = "sharing-affinity.dra-affinity.io/extractors"

#: Its field path, as errors name it.
ANNOTATION_PATH = Path("metadata.annotations").key(SHARING_AFFINITY_ANNOTATION)

Source = Literal["field", "annotation", "none"]


@dataclass(frozen=True)
class SliceExtractors:
    """One slice with the extractors the scheduler reads from it.

    ``slice`` is the slice with ``spec.sharingAffinity`` set to those extractors
    (the very object given when nothing changes); with ``errors`` it carries none."""

    slice: ResourceSlice
    source: Source
    errors: tuple[FieldError, ...] = ()

    @property
    def problem(self) -> str | None:
        """The errors as one line naming the slice, or None."""
        if not self.errors:
            return None
        return f"ResourceSlice {self.slice.metadata.name}: " + "; ".join(
            e.render() for e in self.errors)


@dataclass(frozen=True)
class EffectiveSlices:
    """Slices as the scheduler reads them, and why some declare unreadable extractors."""

    slices: list[ResourceSlice]
    problems: dict[str, str]  # slice name -> SliceExtractors.problem


def slice_extractors(slice_: ResourceSlice) -> SliceExtractors:
    """The slice's extractors from ``spec.sharingAffinity`` or the annotation."""
    text = slice_.metadata.annotations.get(SHARING_AFFINITY_ANNOTATION)
    field = slice_.spec.sharing_affinity
    if text is None:
        return SliceExtractors(slice_, "field" if field else "none")
    entries, errors = _parse(text)
    if not errors:
        probe = slice_.spec.model_copy(update={"sharing_affinity": entries or None})
        errors = validate_sharing_affinity(probe, None, ANNOTATION_PATH)
        if not entries:
            errors.append(invalid(ANNOTATION_PATH, text, "must list at least one extractor "
                                  "(remove the annotation to declare none)"))
    if not errors and field is not None and _pairs(field) != _pairs(entries):
        errors.append(forbidden(ANNOTATION_PATH, "disagrees with spec.sharingAffinity "
                                f"({_short(entries)} vs {_short(field)}): set one, or both equal"))
    if errors:
        cleared = slice_.model_copy(update={
            "spec": slice_.spec.model_copy(update={"sharing_affinity": None})})
        return SliceExtractors(cleared, "annotation", tuple(errors))
    if field is not None:  # equal to the annotation: the slice is read as it is
        return SliceExtractors(slice_, "annotation")
    effective = slice_.model_copy(update={
        "spec": slice_.spec.model_copy(update={"sharing_affinity": entries})})
    return SliceExtractors(effective, "annotation")


Memo = dict[str, tuple[ResourceSlice, SliceExtractors]]


def effective_slices(slices: Iterable[ResourceSlice],
                     memo: Mapping[str, tuple[ResourceSlice, SliceExtractors]] | None = None,
                     ) -> tuple[EffectiveSlices, Memo]:
    """:func:`slice_extractors` over many slices.

    ``memo`` (slice name -> the slice a result was computed from, and the result) is
    reused for a slice that is that very object (stored objects are never mutated);
    the new memo is returned beside the result, holding the given slices only."""
    out: list[ResourceSlice] = []
    problems: dict[str, str] = {}
    new_memo: Memo = {}
    for s in slices:
        name = s.metadata.name
        hit = memo.get(name) if memo is not None else None
        result = hit[1] if hit is not None and hit[0] is s else slice_extractors(s)
        new_memo[name] = (s, result)
        out.append(result.slice)
        if result.problem:
            problems[name] = result.problem
    return EffectiveSlices(out, problems), new_memo


def _parse(text: str) -> tuple[list[SharingAffinityExtractor], list[FieldError]]:
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as e:
        return [], [invalid(ANNOTATION_PATH, text, f"not JSON: {e.msg} at line {e.lineno} "
                            f"column {e.colno}")]
    except RecursionError:
        return [], [invalid(ANNOTATION_PATH, text, "not JSON: nested too deeply")]
    if not isinstance(value, list):
        return [], [invalid(ANNOTATION_PATH, text, "must be a JSON list of {name, expression}, "
                            f"got {_json_type(value)}")]
    entries: list[SharingAffinityExtractor] = []
    errors: list[FieldError] = []
    for i, item in enumerate(value):
        where = ANNOTATION_PATH.index(i)
        if not isinstance(item, dict):
            errors.append(invalid(where, item, f"must be an object {{name, expression}}, "
                                  f"got {_json_type(item)}"))
            continue
        try:
            entries.append(SharingAffinityExtractor.model_validate(item))
        except ValidationError as e:
            errors += [FieldError(f"{where}.{fe.path}" if fe.path else str(where), fe.message,
                                  fe.hint) for fe in validation_errors(e, SharingAffinityExtractor)]
    return entries, errors


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _pairs(entries: Iterable[SharingAffinityExtractor]) -> list[tuple[str, str]]:
    return [(e.name, e.expression) for e in entries]


def _short(entries: Iterable[SharingAffinityExtractor]) -> str:
    s = json.dumps([{"name": n, "expression": x} for n, x in _pairs(entries)],
                   separators=(",", ":"))
    return s if len(s) <= 200 else s[:197] + "..."
