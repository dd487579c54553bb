"""Semantic versions as the Kubernetes CEL ``semver`` library sees them.

Parsing is strict SemVer 2.0.0 (the rules of ``github.com/blang/semver/v4``
``Parse``, which Kubernetes uses); ``Semver.parse(s, normalize=True)`` applies
the Kubernetes normalization (strip a leading ``v``, fill a missing minor or
patch with ``0``, drop leading zeros). Comparison follows SemVer precedence;
build metadata is ignored by comparison, equality and hashing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import re2

from dra_affinity.api.numbers import UINT64_MAX

_NUMBERS: Final = frozenset("0123456789")
_ALNUM: Final = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
# Valid dot-separated identifiers, checked in one linear pass (RE2); anything else takes
# the identifier-by-identifier path, which names the first fault.
_VALID_PRE: Final = re2.compile(
    r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*")
_VALID_BUILD: Final = re2.compile(r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*")


def _parse_number(part: str, what: str, s: str) -> int:
    if not part or not set(part) <= _NUMBERS:
        raise ValueError(f"invalid semver {s!r}: invalid character(s) in {what} number {part!r}")
    if len(part) > 1 and part[0] == "0":
        raise ValueError(f"invalid semver {s!r}: {what} number must not contain leading zeroes")
    if len(part) > 20:
        raise ValueError(f"invalid semver {s!r}: {what} number out of range")
    value = int(part)
    if value > UINT64_MAX:
        raise ValueError(f"invalid semver {s!r}: {what} number out of range")
    return value


@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    """A parsed semantic version. Immutable; ordered by SemVer precedence."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, s: str, normalize: bool = False) -> Semver:
        """Parse ``s``; ``ValueError`` with a clear message if it is not a valid version."""
        if not isinstance(s, str):
            raise ValueError(f"invalid semver {s!r}: not a string")
        if normalize:
            s = _normalize(s)
        if not s:
            raise ValueError("invalid semver '': version string empty")
        parts = s.split(".", 2)
        if len(parts) != 3:
            raise ValueError(f"invalid semver {s!r}: no Major.Minor.Patch elements found")
        major = _parse_number(parts[0], "major", s)
        minor = _parse_number(parts[1], "minor", s)
        patch_str = parts[2]
        build: tuple[str, ...] = ()
        pre_strs: list[str] = []
        if "+" in patch_str:
            patch_str, _, build_str = patch_str.partition("+")
            build = tuple(build_str.split("."))
            for b in () if _VALID_BUILD.fullmatch(build_str) else build:
                if not b:
                    raise ValueError(f"invalid semver {s!r}: build meta data is empty")
                if not set(b) <= _ALNUM:
                    raise ValueError(
                        f"invalid semver {s!r}: invalid character(s) in build meta data {b!r}"
                    )
        if "-" in patch_str:
            patch_str, _, pre_str = patch_str.partition("-")
            pre_strs = pre_str.split(".")
        patch = _parse_number(patch_str, "patch", s)
        pre: list[int | str] = []
        if pre_strs and _VALID_PRE.fullmatch(pre_str):
            return cls(major, minor, patch,
                       tuple(int(p) if p.isdigit() else p for p in pre_strs), build)
        for p in pre_strs:
            if not p:
                raise ValueError(f"invalid semver {s!r}: prerelease is empty")
            if set(p) <= _NUMBERS:
                if len(p) > 1 and p[0] == "0":
                    raise ValueError(
                        f"invalid semver {s!r}: prerelease number must not contain leading zeroes"
                    )
                pre.append(int(p))
            elif set(p) <= _ALNUM:
                pre.append(p)
            else:
                raise ValueError(f"invalid semver {s!r}: invalid character(s) in prerelease {p!r}")
        return cls(major, minor, patch, tuple(pre), build)

    @classmethod
    def is_valid(cls, s: str, normalize: bool = False) -> bool:
        try:
            cls.parse(s, normalize)
        except ValueError:
            return False
        return True

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by SemVer precedence (build metadata ignored)."""
        a = (self.major, self.minor, self.patch)
        b = (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            if type(x) is int and type(y) is int:
                return -1 if x < y else 1
            if type(x) is int:
                return -1
            if type(y) is int:
                return 1
            return -1 if str(x) < str(y) else 1
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __le__(self, other: Semver) -> bool:
        return self.compare(other) <= 0

    def __gt__(self, other: Semver) -> bool:
        return self.compare(other) > 0

    def __ge__(self, other: Semver) -> bool:
        return self.compare(other) >= 0

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            s += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            s += "+" + ".".join(self.build)
        return s

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def _normalize(s: str) -> str:
    """Kubernetes ``normalizeAndParse`` preprocessing."""
    if s.startswith("v"):
        s = s[1:]
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _NUMBERS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError(
                f"invalid semver {s!r}: short version cannot contain PreRelease/Build meta data"
            )
        parts.extend(["0"] * (3 - len(parts)))
    return ".".join(parts)
