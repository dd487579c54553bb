"""Typed ``resource.k8s.io/v1`` and core objects, and manifest I/O."""

from dra_affinity.api.core import Node, NodeSpec, Pod, PodResourceClaim, PodSpec
from dra_affinity.api.io import (
    KINDS,
    Document,
    FieldError,
    ManifestError,
    dump_json,
    dump_yaml,
    format_path,
    load_file,
    load_objects,
    parse_object,
    read_documents,
)
from dra_affinity.api.meta import (
    K8sModel,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    TypedObject,
)
from dra_affinity.api.quantity import Quantity, q
from dra_affinity.api.resource import *  # noqa: F403
from dra_affinity.api.resource import __all__ as _resource_all

__all__ = [  # noqa: RUF005
    "KINDS",
    "Document",
    "FieldError",
    "K8sModel",
    "ManifestError",
    "Node",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSpec",
    "ObjectMeta",
    "Pod",
    "PodResourceClaim",
    "PodSpec",
    "Quantity",
    "TypedObject",
    "dump_json",
    "dump_yaml",
    "format_path",
    "load_file",
    "load_objects",
    "parse_object",
    "q",
    "read_documents",
] + list(_resource_all)
