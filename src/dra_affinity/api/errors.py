"""What manifest reading yields and how it fails: documents, field errors, bounds."""


from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Bounds on reading, whatever the input: a file (or text) of at most 16 MiB,
# at most a million values per document stream after alias expansion, and at
# most 100 levels of nesting (manifests use about 15).
MAX_INPUT_BYTES = 16 * 1024 * 1024
MAX_NODES = 1_000_000
MAX_DEPTH = 100

@dataclass(frozen=True)
class FieldError:
    """One problem at one field path (``spec.devices[0].name``)."""

    path: str
    message: str
    hint: str | None = None

    def render(self) -> str:
        where = f"{self.path}: " if self.path else ""
        tail = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}{self.message}{tail}"


@dataclass
class ManifestError(Exception):
    """Bad input: carries where it is and every field error found."""

    source: str
    errors: list[FieldError]
    document: int | None = None
    line: int | None = None
    object_ref: str | None = None
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.render()

    def location(self) -> str:
        loc = self.source
        if self.document is not None:
            loc += f": document {self.document}"
            if self.line is not None:
                loc += f" (line {self.line})"
        if self.object_ref:
            loc += f" {self.object_ref}"
        return loc

    def render(self) -> str:
        head = self.location()
        if len(self.errors) == 1:
            return f"{head}: {self.errors[0].render()}"
        lines = [f"{head}:"] + [f"  - {e.render()}" for e in self.errors]
        return "\n".join(lines)


@dataclass(frozen=True)
class Document:
    """One YAML document: its data and where it came from."""

    source: str
    index: int  # 1-based
    line: int  # 1-based line of the document start
    data: Any

    def error(self, errors: list[FieldError], object_ref: str | None = None) -> ManifestError:
        return ManifestError(self.source, errors, self.index, self.line, object_ref)
