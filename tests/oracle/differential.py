"""Shared machinery of the differential suites: findings, allow-list, reports.

A *finding* is one aspect (``kind``) on which our implementation and upstream
disagree for one case. The allow-list (known_differences.py) names classes
of findings with a reason; the suites assert that every finding is covered by
an entry and that every entry covers at least one finding (so fixing a
difference forces its entry's removal).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One disagreement: ``kind`` on case ``family``/``subject`` (expression or problem id)."""

    family: str
    kind: str
    subject: str
    detail: str
    size: int  # for picking a minimal example: smaller is simpler
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Known:
    """An allow-listed class of findings.

    A finding belongs to the class when its kind is in ``kinds`` and, where
    given, its family is in ``families``, its subject matches ``subject``
    (a regular expression, searched) and ``where`` accepts it.
    """

    name: str
    reason: str
    kinds: frozenset[str]
    families: frozenset[str] | None = None
    subject: str | None = None
    where: Callable[[Finding], bool] | None = None

    def matches(self, f: Finding) -> bool:
        if f.kind not in self.kinds:
            return False
        if self.families is not None and f.family not in self.families:
            return False
        if self.subject is not None and not re.search(self.subject, f.subject):
            return False
        return self.where is None or self.where(f)


@dataclass
class Verdict:
    unexplained: list[Finding]
    explained: dict[str, list[Finding]]
    unused: list[Known]


def judge(findings: Iterable[Finding], known: Sequence[Known]) -> Verdict:
    """Assign each finding to the first allow-list entry that matches it."""
    explained: dict[str, list[Finding]] = {k.name: [] for k in known}
    unexplained: list[Finding] = []
    for f in findings:
        for k in known:
            if k.matches(f):
                explained[k.name].append(f)
                break
        else:
            unexplained.append(f)
    unused = [k for k in known if not explained[k.name]]
    return Verdict(unexplained, explained, unused)


def _group(findings: Iterable[Finding]) -> dict[tuple[str, str], list[Finding]]:
    groups: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        groups[(f.family, f.kind)].append(f)
    return dict(sorted(groups.items()))


def minimal(fs: Sequence[Finding]) -> Finding:
    return min(fs, key=lambda f: (f.size, f.subject, f.detail))


def render(title: str, total_cases: int, verdict: Verdict, known: Sequence[Known]) -> str:
    """The grouped disagreement report (Markdown), deterministic."""
    out = [f"# {title}", "", f"Cases compared: {total_cases}.", ""]
    n_expl = sum(len(v) for v in verdict.explained.values())
    out.append(f"Findings: {n_expl + len(verdict.unexplained)} "
               f"({n_expl} allow-listed, {len(verdict.unexplained)} unexplained).")
    out.append("")
    if verdict.unexplained:
        out += ["## Unexplained disagreements (by family and kind)", ""]
        for (family, kind), fs in _group(verdict.unexplained).items():
            ex = minimal(fs)
            out += [f"### {family} / {kind}: {len(fs)} case(s)", "", "```", ex.subject, "```",
                    "", ex.detail, ""]
    out += ["## Allow-listed classes", ""]
    for k in known:
        fs = verdict.explained[k.name]
        out.append(f"### {k.name}: {len(fs)} finding(s)")
        out += ["", k.reason, ""]
        if fs:
            ex = minimal(fs)
            out += ["Minimal example:", "", "```", ex.subject, "```", "", ex.detail, ""]
            fams = sorted({f.family for f in fs})
            out += [f"Families: {', '.join(fams)}", ""]
        else:
            out += ["**No finding matched this entry: the difference is gone, remove the entry.**", ""]
    return "\n".join(out) + "\n"


def write_report(path: Path, text: str, findings: Sequence[Finding]) -> None:
    """Write the Markdown report and, next to it, every finding as JSON lines."""
    path.write_text(text, encoding="utf-8")
    with path.with_suffix(".jsonl").open("w", encoding="utf-8") as fh:
        for f in findings:
            fh.write(json.dumps({"family": f.family, "kind": f.kind, "subject": f.subject,
                                 "detail": f.detail}, sort_keys=True) + "\n")


def failure_message(verdict: Verdict, report: Path) -> str:
    parts = []
    if verdict.unexplained:
        groups = _group(verdict.unexplained)
        parts.append(f"{len(verdict.unexplained)} unexplained disagreement(s) in {len(groups)} class(es):")
        for (family, kind), fs in list(groups.items())[:40]:
            ex = minimal(fs)
            parts.append(f"  [{family} / {kind}] x{len(fs)}: {ex.subject[:200]}\n      {ex.detail[:400]}")
    if verdict.unused:
        parts.append("allow-list entries that matched nothing (fixed? remove them): "
                     + ", ".join(k.name for k in verdict.unused))
    parts.append(f"full report: {report}")
    return "\n".join(parts)
