"""CPU per answer read off a kept connection: ``http.client`` (what the transport used
before) against :func:`dra_affinity.kube.api.read_answer` (llhttp through httptools).

The answer is shaped as kube-apiserver sends a claim's status write back: its usual
headers and a chunked JSON body of about 2 KB. Both readers take it from a socket pair
on loopback, so each includes the same ``recv``; the figure that matters is the ratio.

    python benchmarks/http_answer.py --answers 20000
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import time
from collections.abc import Callable

from dra_affinity.kube.api import read_answer

HEADERS = (b"HTTP/1.1 200 OK\r\n"
           b"Audit-Id: 1b3f2c4e-0000-4000-8000-123456789012\r\n"
           b"Cache-Control: no-cache, private\r\n"
           b"Content-Type: application/json\r\n"
           b"X-Kubernetes-Pf-Flowschema-Uid: 0f1e2d3c-0000-4000-8000-123456789012\r\n"
           b"X-Kubernetes-Pf-Prioritylevel-Uid: 0f1e2d3c-0000-4000-8000-123456789013\r\n"
           b"Date: Sun, 06 Dec 2026 23:57:41 GMT\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n")


def _body() -> bytes:
    claim = {"kind": "ResourceClaim", "apiVersion": "resource.k8s.io/v1",
             "metadata": {"name": "pod-0-nic-x7k2p", "namespace": "bench", "uid": "u" * 36,
                          "resourceVersion": "123456",
                          "finalizers": ["resource.kubernetes.io/delete-protection"]},
             "spec": {"devices": {
                 "requests": [{"name": "nic", "exactly": {"deviceClassName": "nic",
                                                          "count": 1}}],
                 "config": [{"opaque": {"driver": "nic.example.com",
                                        "parameters": {"subnet": "10.0.0.0/24"}}}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "nic", "driver": "nic.example.com", "pool": "node-0",
                  "device": "nic-0"}]}},
                 "reservedFor": [{"resource": "pods", "name": "pod-0", "uid": "p" * 36}]}}
    return json.dumps(claim).encode() * 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--answers", type=int, default=20000)
    args = ap.parse_args()
    body = _body()
    wire = HEADERS + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    ours, theirs = socket.socketpair()

    def with_http_client() -> bytes:
        resp = http.client.HTTPResponse(theirs, method="PATCH")
        resp.begin()
        return resp.read()

    def with_read_answer() -> bytes:
        return read_answer(theirs)[2]

    def per_answer(read: Callable[[], bytes]) -> float:
        t0 = time.process_time()
        for _ in range(args.answers):
            ours.sendall(wire)
            if read() != body:
                raise SystemExit(f"{read.__name__}: wrong body")
        return (time.process_time() - t0) / args.answers * 1e6

    rounds = [(per_answer(with_http_client), per_answer(with_read_answer)) for _ in range(3)]
    before = min(r[0] for r in rounds)
    after = min(r[1] for r in rounds)
    print(json.dumps({"answers": args.answers, "bodyBytes": len(body),
                      "httpClientMicroseconds": round(before, 1),
                      "readAnswerMicroseconds": round(after, 1),
                      "ratio": round(after / before, 3)}))


if __name__ == "__main__":
    main()
