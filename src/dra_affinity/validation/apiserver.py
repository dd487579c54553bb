"""The API server's write path: what it writes into an object, then validation.

``admit`` is what a create or update goes through before it is stored:

1. ``PrepareForCreate`` / ``PrepareForUpdate``: on a pod's create, its
   ``matchLabelKeys`` and ``mismatchLabelKeys`` are merged into its term selectors
   (:func:`~dra_affinity.validation.pod_strategy.merge_label_keys`). With the
   ``DRASharingAffinity`` gate off, ``spec.sharingAffinity`` is dropped from
   slices, except on an update of a slice that already had it (ratcheting
   drop-on-disable, KEP-5981 "Downgrade"). Kubernetes drops silently and the ResourceSlice controller
   helper reports a ``DroppedFieldsError``; here the drop is returned as a
   warning naming the field and the gate, so callers need not diff.
2. Validation (:func:`dra_affinity.validation.admission.validate_object`) of the
   object as it would be stored.

The input is never mutated. The stored object is a deep copy of it, unless the
caller hands the object over (``copy=False``: as an API server's decoder hands over
what it decoded, the caller keeps no reference it will mutate); then only a write
that must change the object (a field dropped) copies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from dra_affinity.api.core import Pod
from dra_affinity.api.io import FieldError
from dra_affinity.api.resource import ResourceSlice
from dra_affinity.features import Features, name_of
from dra_affinity.validation.admission import validate_object
from dra_affinity.validation.pod_strategy import merge_label_keys

__all__ = ["AdmissionResult", "admit"]

DEFAULTS = Features()


@dataclass
class AdmissionResult:
    """What the API server did with a write.

    ``object`` is the object as stored (a deep copy unless handed over, fields dropped
    by disabled gates removed), or None when ``errors`` is non-empty and nothing was stored.
    """

    object: BaseModel | None
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _in_use(slice_: ResourceSlice | None) -> bool:
    return slice_ is not None and bool(slice_.spec.sharing_affinity)


def _drop_sharing_affinity(stored: ResourceSlice) -> None:
    """Remove the field as if it had never been sent (it then dumps as absent): a new
    spec with the same values and set fields, less this one."""
    spec = stored.spec
    stored.spec = type(spec).model_construct(
        spec.model_fields_set - {"sharing_affinity"},
        **{name: value for name, value in spec if name != "sharing_affinity"},
    )


def admit(
    obj: BaseModel, old: BaseModel | None = None, *, features: Features = DEFAULTS,
    copy: bool = True,
) -> AdmissionResult:
    """Create (``old`` None) or update ``obj`` through the gate rules and validation.

    ``copy=False``: the caller hands ``obj`` over (it and its parts are never mutated
    again, by the caller or by anyone): it is stored as it is, without the defensive
    deep copy, which is most of the cost of admitting a small object."""
    stored = obj.model_copy(deep=True) if copy else obj
    warnings: list[str] = []
    if old is None and isinstance(stored, Pod):
        stored = merge_label_keys(stored)  # a new object when it changes: obj is never mutated
    if isinstance(stored, ResourceSlice) and not features.apiserver_sharing_affinity:
        old_slice = old if isinstance(old, ResourceSlice) else None
        # Ratcheting drop-on-disable: an update of a slice that already declares
        # sharing affinity keeps whatever the update says (changed, or null to clear).
        if not _in_use(old_slice):
            entries = stored.spec.sharing_affinity
            if stored.spec.sharing_affinity is not None:
                if stored is obj:  # handed over, but its parts may be shared: copy to change
                    stored = stored.model_copy(deep=True)
                _drop_sharing_affinity(stored)
            if entries:
                warnings.append(
                    f"ResourceSlice {stored.metadata.name!r}: spec.sharingAffinity "
                    f"({len(entries)} extractor(s)) was dropped because the "
                    f"{name_of('apiserver_sharing_affinity')} feature gate is disabled in the API server"
                )
    errors = validate_object(stored, old)
    if errors:
        return AdmissionResult(None, errors, warnings)
    return AdmissionResult(stored, [], warnings)
