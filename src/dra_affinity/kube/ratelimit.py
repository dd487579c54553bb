"""Client-side rate limiting, as client-go's ``--kube-api-qps`` / ``--kube-api-burst``.

A token bucket per client: tokens accrue at ``qps`` per second up to ``burst``; each
request takes one, waiting for it when there is none. A burst of writes (a queue of
pods that all fit) goes out at once up to ``burst`` and then at ``qps``, so one
scheduler cannot flood the API server. ``qps <= 0`` turns the limit off.

:class:`RateLimitedApi` wraps any :class:`~.api.Api`: every request and every watch
it starts waits for a token, and each request is counted (method and status) for
the metrics, as client-go's ``rest_client_requests_total``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from .api import Api, ApiError

_T = TypeVar("_T")

__all__ = ["KUBE_API_BURST", "KUBE_API_QPS", "RateLimitedApi", "TokenBucket"]

# The defaults of --kube-api-qps and --kube-api-burst, chosen by measurement
# (docs/decisions.md, "Client-side rate limit").
KUBE_API_QPS = 500.0
KUBE_API_BURST = 1000


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` saved; thread-safe."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 with a qps limit, got {burst}")
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.sleep = sleep
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()

    @property
    def limited(self) -> bool:
        return self.qps > 0

    def reserve(self) -> float:
        """Take a token (perhaps one not accrued yet); returns how long to wait for it."""
        if not self.limited:
            return 0.0
        with self._lock:
            now = self.clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def wait(self) -> float:
        """Block until a token is ours; returns the seconds waited."""
        delay = self.reserve()
        if delay > 0:
            self.sleep(delay)
        return delay


class RateLimitedApi:
    """An :class:`~.api.Api` whose requests and watches wait for the bucket's tokens."""

    def __init__(self, api: Api, bucket: TokenBucket, *,
                 observe: Callable[[str, int, float], None] | None = None) -> None:
        self.api = api
        self.bucket = bucket
        # observe(method, status, seconds waited for a token), after each request
        # (status 0: the request did not reach the server).
        self.observe = observe

    def request(self, method: str, path: str, *, body: Any = None,
                query: Mapping[str, str] | None = None,
                content_type: str = "application/json",
                timeout: float | None = None) -> Any:
        return self._limited(method, lambda: self.api.request(
            method, path, body=body, query=query, content_type=content_type, timeout=timeout))

    def request_bytes(self, method: str, path: str, *, body: bytes | None = None,
                      content_type: str = "application/json", accept: str = "application/json",
                      timeout: float | None = None) -> bytes:
        return self._limited(method, lambda: self.api.request_bytes(
            method, path, body=body, content_type=content_type, accept=accept, timeout=timeout))

    def watch(self, path: str, query: Mapping[str, str], timeout: float) -> Iterator[dict[str, Any]]:
        return self._limited("WATCH", lambda: self.api.watch(path, query, timeout))

    def _limited(self, method: str, call: Callable[[], _T]) -> _T:
        """One request once the bucket has a token; its status and wait observed."""
        waited = self.bucket.wait()
        try:
            out = call()
        except ApiError as e:
            self._observe(method, e.status, waited)
            raise
        self._observe(method, 200, waited)
        return out

    def _observe(self, method: str, status: int, waited: float) -> None:
        if self.observe is not None:
            self.observe(method, status, waited)
