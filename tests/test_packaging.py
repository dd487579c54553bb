"""Packaging: pinned build backend, SPDX license, runtime pins, image context, entry points."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONSTRAINTS = ROOT / "deploy" / "constraints.txt"


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version
    return pins


def test_build_backend_is_pinned_and_license_is_an_spdx_string() -> None:
    for req in PYPROJECT["build-system"]["requires"]:
        spec = list(Requirement(req).specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"unpinned build requirement {req}"
    assert PYPROJECT["project"]["license"] == "Apache-2.0"


def test_every_runtime_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    for raw in PYPROJECT["project"]["dependencies"]:
        req = Requirement(raw)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} has no pin in deploy/constraints.txt"
        assert req.specifier.contains(pins[name]), f"{req.name}=={pins[name]} outside {req.specifier}"
    assert list(pins) == sorted(pins), "constraints.txt is sorted by name"


def test_the_image_installs_with_the_constraints_from_a_small_context() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "-c deploy/constraints.txt" in dockerfile
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore, "the context starts from nothing"
    copied = {path for line in dockerfile.splitlines() if line.startswith("COPY ")
              for path in line.split()[1:-1]}
    assert {"pyproject.toml", "README.md", "src", "deploy/constraints.txt"} <= copied
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for path in copied:
        assert path.rstrip("/") in allowed, f"Dockerfile copies {path}, which .dockerignore excludes"
        assert (ROOT / path).exists()


def test_console_scripts_include_the_kubectl_plugin() -> None:
    scripts = PYPROJECT["project"]["scripts"]
    assert scripts["dra-affinity"] == "dra_affinity.cli:main"
    assert scripts["kubectl-dra_affinity"] == "dra_affinity.cli:kubectl_plugin"
