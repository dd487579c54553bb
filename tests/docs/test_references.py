"""What the documentation names in backticks exists: paths, command-line flags, annotation keys.

A page goes stale when a file moves, an option is renamed or an annotation key changes;
links are checked by ``test_pages.py`` and commands in ``sh``/``console`` blocks are run
by ``test_commands.py``, and this checks the inline code spans of the prose:

- **Paths.** A span that is a path (no spaces; slash-separated) whose first part is an
  entry of the repository's root (``docs/``, ``tests/...``, ``.ci/run``) or a package
  or module of ``src/dra_affinity`` (``scheduler/reserve.py``, ``sim/``), or a bare source
  file name (``store.py``): it must exist
  (a ``*`` must match something; a bare name must be the name of some file in it).
  Other spans with slashes (``resource.k8s.io/v1``, ``namespace/name``, ``out/...``)
  are not paths of this repository and are left alone.
- **Flags.** In a span that starts with ``dra-affinity COMMAND``, every ``--flag`` must be
  an option of that command; in ``python benchmarks/SCRIPT.py ...``, of that script. A
  span that is a flag alone (``--scoring``, ``--at-step N``) belongs to the command the
  section last named (in a span, a heading or a code block); with none named it must
  be an option of some command or script of the repository, or a flag its code passes
  to another program (the control plane's binaries).
- **Modules.** ``dra_affinity.x.y`` must be a module of the package or a name one defines.
- **Annotation keys.** A span naming a key of this project's domain
  (``…dra-affinity.io/…``) must be a string the code defines.
- **Metric names.** Anywhere on a page (prose, tables, queries in blocks), a name of
  this scheduler's metrics (``sharing_affinity_…``, ``dra_affinity_…``) must be one that
  a scheduler process's ``/metrics`` declares: a counter with its ``_total``, a
  histogram by its name or a sample's (``_bucket``, ``_count``, ``_sum``).

Each problem names the page, the line and the span.
"""

from __future__ import annotations

import functools
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from dra_affinity.cli import main
from dra_affinity.kube.runner import Options, SchedulerProcess
from kube.fakeapi import FakeApi

from .test_commands import PAGES, ROOT

SPAN = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s*```")
HEADING = re.compile(r"^#{1,6}\s")
PATH = re.compile(r"^[\w.*-]+(?:/[\w.*-]+)*/?$")
LONG_FLAG = re.compile(r"^--[a-zA-Z][\w-]*")
OUR_COMMAND = re.compile(r"(?:^|[\s`])dra-affinity\s+([a-z][a-z-]*)")
SCRIPT = re.compile(r"(?:^|[\s`])(?:python\s+)?(benchmarks/[\w-]+\.py)\b")
DOTTED = re.compile(r"^dra_affinity(?:\.\w+)+$")
ANNOTATION = re.compile(r"^((?:[a-z0-9-]+\.)*dra-affinity\.io/[\w.-]+)")
#: A metric of this scheduler's: the KEP's or its own (not a recording rule's
#: ``dra_affinity:…``, not an environment variable's upper case).
METRIC = re.compile(r"\b(?:sharing_affinity|dra_affinity)_[a-z0-9_]*[a-z0-9]")
#: Kinds of file a bare name (``store.py``) is checked for: source, not data (a bare
#: ``cluster.yaml`` or ``state.json`` is often what a command on the page writes).
FILE_SUFFIXES = (".py", ".md", ".sh", ".toml")
PACKAGE = ROOT / "src" / "dra_affinity"
#: Where the code lives (annotation keys, flags passed to other programs).
CODE_DIRS = ("src", "tests", "test", "benchmarks", "conformance", ".ci", "deploy")
#: Bare file names the pages use for files of other projects (cel-python's modules, the
#: files kube-scheduler's and cel-go's sources are compared with, generated reports).
FOREIGN_FILES = frozenset({
    "alloc_gen.py", "checker.py", "interpreter.py", "parser.py", "build.sh",
    "allocate-report.md", "cel-report.md",
})
#: Other programs: a flag right after one of these names on a line is that program's.
OTHER_PROGRAMS = re.compile(
    r"\b(kube-apiserver|kube-controller-manager|kube-scheduler|etcd|kubectl|pytest|go build|"
    r"pip|git)\b")


@dataclass(frozen=True)
class Span:
    page: str
    line: int
    text: str
    #: The commands the section last named ("dra-affinity X" or a script; a code block
    #: names all of its commands), or ``FOREIGN`` after another program's name.
    context: tuple[str, ...]

    def problem(self, what: str) -> str:
        return f"{self.page}:{self.line}: `{self.text}`: {what}"


def spans(page: str, text: str | None = None) -> Iterator[Span]:
    """Inline code spans of the page's prose (``text``, or the page's file), each with the
    command its section last named."""
    context: tuple[str, ...] = ()
    gap = ""  # prose since the last span, in this paragraph
    block: list[str] = []
    inside = False
    if text is None:
        text = (ROOT / page).read_text(encoding="utf-8")
    for no, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            inside = not inside
            if inside:
                block = []
            elif block:
                context = tuple(dict.fromkeys(block))
            continue
        named = _named_command(line)
        if inside:
            block += [named] if named else []
            continue
        if HEADING.match(line):
            context = (named,) if named else ()
            gap = ""
            continue
        if not line.strip():
            gap = ""
        end = 0
        on_line: list[str] = []  # `explain`, `locks`, `metrics`: all three
        for m in SPAN.finditer(line):
            if OTHER_PROGRAMS.search(gap + line[end:m.start()]):
                context = (FOREIGN,)
            gap, end = "", m.end()
            span = m.group(2).strip()
            yield Span(page, no, span, context)
            named = _named_command(span)
            if named is None and span in main.commands:
                named = f"dra-affinity {span}"  # **`validate`** starts its paragraph
            if named:
                on_line.append(named)
                context = tuple(dict.fromkeys(on_line))
        gap += line[end:] + " "


FOREIGN = "another program"


def _named_command(text: str) -> str | None:
    m = OUR_COMMAND.search(text)
    if m is not None and m.group(1) in main.commands:
        return f"dra-affinity {m.group(1)}"
    s = SCRIPT.search(text)
    return s.group(1) if s is not None else None


# ------------------------------------------------------------------ what exists
@functools.cache
def tracked() -> tuple[str, ...]:
    """The repository's files (what a clone has: not generated output, not the venv)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return tuple(f for f in out.stdout.decode().split("\0") if f and (ROOT / f).exists())


@functools.cache
def tracked_paths() -> frozenset[str]:
    """Every tracked file and every directory above one."""
    out: set[str] = set()
    for f in tracked():
        parts = f.split("/")
        out |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return frozenset(out)


@functools.cache
def top_level() -> frozenset[str]:
    return frozenset(f.split("/", 1)[0] for f in tracked())


@functools.cache
def package_parts() -> frozenset[str]:
    prefix = "src/dra_affinity/"
    return frozenset(f[len(prefix):].split("/", 1)[0] for f in tracked() if f.startswith(prefix))


@functools.cache
def file_names() -> frozenset[str]:
    return frozenset(f.rsplit("/", 1)[-1] for f in tracked())


@functools.cache
def code_text() -> str:
    """Every code file of the repository (these tests aside), concatenated: the strings it
    defines or passes."""
    return "\n".join((ROOT / f).read_text(encoding="utf-8", errors="replace") for f in tracked()
                     if f.split("/", 1)[0] in CODE_DIRS and not f.startswith("tests/docs/")
                     and Path(f).suffix in {".py", ".sh", ".yaml", ".go", ""})


def _exists(rel: str) -> bool:
    """Whether ``rel`` (from the repository's root; ``*`` any part of a name) is tracked."""
    if "*" in rel:
        pattern = re.compile("^" + re.escape(rel).replace(r"\*", "[^/]*") + "$")
        return any(pattern.match(p) for p in tracked_paths())
    return rel in tracked_paths()


def path_problem(span: Span) -> str | None:
    text = span.text.split("#", 1)[0].split("::", 1)[0]
    if not PATH.match(text) or text in {"/", "."}:
        return None
    rel = text.rstrip("/")
    first = rel.split("/", 1)[0]
    if "/" not in rel:
        if rel.startswith(".") or "*" in rel or not rel.endswith(FILE_SUFFIXES):
            return None  # ``.yaml``, a glob of names, a word
        if rel in top_level() or rel in FOREIGN_FILES or rel in file_names():
            return None
        return span.problem("no file of this name in the repository")
    if first in top_level():
        return None if _exists(rel) else span.problem(f"no such path ({rel})")
    if first in package_parts():
        return None if _exists(f"src/dra_affinity/{rel}") else span.problem(
            f"no such path under src/dra_affinity ({rel})")
    return None


@functools.cache
def command_options(command: str) -> frozenset[str]:
    """Options of ``dra-affinity X`` (click) or of a benchmark script (its ``--help``)."""
    if command.startswith("dra-affinity "):
        cmd: click.Command = main.commands[command.split()[1]]
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        return frozenset(opts | {"--help"})
    out = subprocess.run([sys.executable, str(ROOT / command), "--help"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, check=False)
    return frozenset(re.findall(r"(?<![\w-])--[a-zA-Z][\w-]*", out.stdout))


@functools.cache
def all_options() -> frozenset[str]:
    scripts = [f"benchmarks/{p.name}" for p in (ROOT / "benchmarks").glob("*.py")
               if "argparse" in p.read_text(encoding="utf-8")]
    out: set[str] = set()
    for c in [*(f"dra-affinity {n}" for n in main.commands), *scripts]:
        out |= command_options(c)
    return frozenset(out)


def _known(flag: str, options: frozenset[str]) -> bool:
    """``flag`` among ``options``; ``--scaling-*`` stands for every option it begins."""
    if flag.endswith("*"):
        return any(o.startswith(flag[:-1]) for o in options)
    return flag in options


def flag_problems(span: Span) -> list[str]:
    own = _named_command(span.text)
    if own is not None:
        where: tuple[str, ...] = (own,)
        words = span.text.split()
    elif LONG_FLAG.match(span.text):
        where = span.context
        words = span.text.split()
        if len(words) > 1 and not words[1].startswith("-"):
            words = words[:1]  # a flag and its value
    else:
        return []
    out = []
    for word in words:
        m = re.match(r"^--[a-zA-Z][\w-]*\*?", word.strip("[]"))
        if m is None:
            continue
        flag = m.group(0)
        if where and FOREIGN not in where:
            if not any(_known(flag, command_options(c)) for c in where):
                out.append(span.problem(f"{flag} is not an option of {' or '.join(where)}"))
        elif not _known(flag, all_options()) and not re.search(
                rf"(?<![\w-]){re.escape(flag)}(?![\w-])", code_text()):
            out.append(span.problem(f"{flag} is an option of no command or script here, "
                                    "and the code passes it to no program"))
    return out


def module_problem(span: Span) -> str | None:
    """``dra_affinity.x.y``: a module of the package, or a name one defines."""
    if not DOTTED.match(span.text):
        return None
    parts = span.text.split(".")
    for i in range(len(parts), 0, -1):
        module = "/".join(parts[:i])
        if _exists(f"src/{module}.py") or _exists(f"src/{module}/__init__.py"):
            obj: object = importlib.import_module(".".join(parts[:i]))
            for name in parts[i:]:
                if not hasattr(obj, name):
                    return span.problem(f"{'.'.join(parts[:i])} defines no {'.'.join(parts[i:])}")
                obj = getattr(obj, name)
            return None
    return span.problem("no such module")


@functools.cache
def served_metrics() -> frozenset[str]:
    """The names a scheduler process's ``/metrics`` declares (its ``# TYPE`` lines: a
    counter's with ``_total``), and the samples of its histograms."""
    proc = SchedulerProcess(FakeApi(), Options(leader_elect=False, metrics_port=-1))
    out: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", proc.metrics.exposition(), re.M):
        out.add(name)
        if kind == "histogram":
            out |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return frozenset(out)


def metric_problems(page: str, text: str) -> list[str]:
    return [f"{page}:{no}: `{name}`: no such metric on /metrics"
            for no, line in enumerate(text.splitlines(), start=1)
            for name in METRIC.findall(line) if name not in served_metrics()]


def annotation_problem(span: Span) -> str | None:
    m = ANNOTATION.match(span.text)
    if m is None:
        return None
    key = m.group(1)
    if f'"{key}"' in code_text() or f"'{key}'" in code_text() or f"{key}:" in code_text():
        return None
    return span.problem(f"the code defines no key {key!r}")


# ------------------------------------------------------------------ the tests
@pytest.mark.parametrize("page", PAGES)
def test_paths_flags_keys_and_metric_names_exist(page: str) -> None:
    problems = problems_in(page)
    assert not problems, "\n".join(problems)


def problems_in(page: str, text: str | None = None) -> list[str]:
    problems = metric_problems(page, text if text is not None else (ROOT / page).read_text(encoding="utf-8"))
    for span in spans(page, text):
        for found in (path_problem(span), module_problem(span), annotation_problem(span),
                      *flag_problems(span)):
            if found is not None:
                problems.append(found)
    return problems


def test_each_kind_of_stale_reference_is_found() -> None:
    page = "\n".join([
        "# Title",
        "Moved: `scheduler/freeindex.py`, `tests/scheduler/test_gone.py`, `gone_module.py`.",
        "Kept: `scheduler/fastpath/freeindex.py`, `tests/docs/`, `store.py`, `examples/*.yaml`.",
        "Not ours: `resource.k8s.io/v1`, `namespace/name`, `out/report.md`, `/metrics`.",
        "Run `dra-affinity simulate --scoring affinity` or `dra-affinity simulate --no-such`.",
        "Then `--output json` fits, `--kubeconfig` does not (simulate has none).",
        "## Another section",
        "`--together` is some command's, `--not-an-option` is nobody's.",
        "`--authorization-mode=Node,RBAC` is what the code passes to the API server.",
        "Keys: `dra-affinity.io/affinity-pools=true:NoSchedule`, `dra-affinity.io/gone-key`.",
        "Script: `python benchmarks/soak.py --max-growth-mb 8 --no-such-flag`.",
        "Modules: `dra_affinity.sim.store`, `dra_affinity.api._getattr`, `dra_affinity.api.meta.Gone`.",
        "Metrics: `dra_affinity_dropped_total`, `sharing_affinity_filter_duration_seconds_bucket`,",
        "`dra_affinity_dropped` (a counter without its _total), `sharing_affinity_gone_total`.",
        "```promql",
        'sum(rate(dra_affinity_filter_verdicts_total{outcome="reused"}[5m])) / dra_affinity:gone:rate5m',
        "sum(rate(dra_affinity_filter_verdict_total[5m]))",
        "```",
    ])
    problems = problems_in("docs/page.md", page)
    tokens = [p.split(": ", 1)[1].split(": ", 1)[0] for p in problems]
    assert tokens == [
        "`dra_affinity_dropped`", "`sharing_affinity_gone_total`", "`dra_affinity_filter_verdict_total`",
        "`scheduler/freeindex.py`", "`tests/scheduler/test_gone.py`", "`gone_module.py`",
        "`dra-affinity simulate --no-such`", "`--kubeconfig`", "`--not-an-option`",
        "`dra-affinity.io/gone-key`", "`python benchmarks/soak.py --max-growth-mb 8 --no-such-flag`",
        "`dra_affinity.api._getattr`", "`dra_affinity.api.meta.Gone`",
    ], "\n".join(problems)
    assert all(p.startswith("docs/page.md:") for p in problems)
    assert "docs/page.md:14: `dra_affinity_dropped`: no such metric" in problems[0]
    assert "docs/page.md:2: `scheduler/freeindex.py`: no such path" in problems[3]
    assert "--kubeconfig is not an option of dra-affinity simulate" in problems[7]
