"""Run a command that prints one JSON object; fail with its stderr otherwise."""

from __future__ import annotations

import json
import subprocess


def run_json(argv: list[str], timeout: int = 300) -> dict[str, object]:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert isinstance(out, dict)
    return out
