"""Client of the Go differential oracle (conformance/oracle).

The oracle is a long-running process that reads one JSON request per line and
answers one JSON line per request, in order. :class:`Oracle` starts it once
and pipelines batches of requests through it (a writer thread feeds stdin
while the caller reads stdout, so neither pipe can fill up and deadlock).

:func:`oracle_binary` builds the binary on demand through
``conformance/oracle/build.sh`` (a no-op when the content-addressed binary is
already cached). Without a Go toolchain the oracle suites skip, except when the
``CI`` environment variable is set: there a missing toolchain is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "conformance" / "oracle" / "build.sh"


class OracleError(RuntimeError):
    """The oracle process failed, or answered a request with ``fatal``."""


def require_go() -> None:
    """Skip the calling test when ``go`` is missing, unless ``CI`` is set (then fail)."""
    if shutil.which("go") is not None:
        return
    message = "the Go toolchain (`go`) is not on PATH: the upstream oracle cannot be built"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


def oracle_binary() -> Path:
    """Build (or find in the cache) the oracle binary and return its path."""
    require_go()
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise OracleError(
            f"{BUILD_SCRIPT} failed with exit code {proc.returncode}:\n{proc.stderr[-4000:]}"
        )
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise OracleError(f"{BUILD_SCRIPT} printed no binary path")
    path = Path(lines[-1])
    if not path.is_file():
        raise OracleError(f"{BUILD_SCRIPT} printed {path}, which is not a file")
    return path


class Oracle:
    """One running oracle process; not thread-safe (one caller at a time)."""

    def __init__(self, binary: Path) -> None:
        # Kept open for the process lifetime; closed in close().
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self._proc = subprocess.Popen(
            [str(binary)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-4000:].decode("utf-8", "replace")

    def request(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its answer."""
        return self.batch([payload])[0]

    def batch(self, payloads: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send many requests pipelined; return the answers in the same order.

        Raises :class:`OracleError` if the process dies or any answer is
        ``fatal`` (a malformed request: a bug of the suite, not a finding).
        """
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        if proc.poll() is not None:
            raise OracleError(f"oracle exited with {proc.returncode}: {self._stderr_tail()}")
        lines = [json.dumps(p, separators=(",", ":")).encode() + b"\n" for p in payloads]
        failure: list[BaseException] = []

        def feed(stdin: IO[bytes], data: Iterable[bytes]) -> None:
            try:
                for line in data:
                    stdin.write(line)
                stdin.flush()
            except (BrokenPipeError, OSError) as e:  # reported by the reader below
                failure.append(e)

        writer = threading.Thread(target=feed, args=(proc.stdin, lines), daemon=True)
        writer.start()
        answers: list[dict[str, Any]] = []
        rejected: str | None = None
        try:
            for i in range(len(lines)):
                raw = proc.stdout.readline()
                if not raw:
                    raise OracleError(
                        f"oracle closed stdout after {i} of {len(lines)} answers "
                        f"(exit {proc.poll()}): {self._stderr_tail()}"
                    )
                answer = json.loads(raw)
                if "fatal" in answer and rejected is None:
                    # keep reading: the writer may be blocked until the answers are drained
                    rejected = (
                        f"oracle rejected request {i}: {answer['fatal']}\nrequest: {lines[i][:2000]!r}"
                    )
                answers.append(answer)
        finally:
            writer.join()
        if failure:
            raise OracleError(f"writing to the oracle failed: {failure[0]}")
        if rejected is not None:
            raise OracleError(rejected)
        return answers

    def close(self) -> None:
        """Close stdin and wait for the process to exit."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            # BrokenPipeError: the process is gone already; nothing to flush to.
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()


def report_dir() -> Path:
    """Where the suites write their disagreement reports (``out/oracle`` by default)."""
    d = Path(os.environ.get("DRA_AFFINITY_ORACLE_REPORT_DIR", REPO / "out" / "oracle"))
    d.mkdir(parents=True, exist_ok=True)
    return d
