"""An in-memory API server for the adapter's unit tests.

It does what the adapter relies on and nothing more: one global resourceVersion
counter, optimistic concurrency (a PUT with a stale resourceVersion is 409), the
``status`` subresource (only status is taken from the body) and the main resource
(status kept), ``binding`` for pods, ``generateName``, merge patches, lists with
``limit``/``continue``, ``fieldSelector`` terms ``spec.F=V`` / ``status.F!=V``, and watches
replayed from a history (410 Gone below the compaction point). Hooks let a test
inject a concurrent write or a failure before a given request, and :meth:`FakeApi.fail`
fails chosen requests as a real server or network does: 409, 422, 500, a timeout or
a reset connection, the last two after the request was carried out or before.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dra_affinity.kube import protowire
from dra_affinity.kube.api import RESOURCES, ApiError

_BY_PLURAL = {r.plural: r for r in RESOURCES.values()}


class FakeApi:
    def __init__(self) -> None:
        self.rv = 0
        self.objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in RESOURCES}
        self.history: list[tuple[int, str, str, dict[str, Any]]] = []  # rv, kind, type, obj
        self.compacted = 0
        self.requests: list[tuple[str, str]] = []
        # (method, path, timeout) of every request, as the client asked it
        self.timeouts: list[tuple[str, str, float | None]] = []
        # (method, path, body) of every JSON request with a body
        self.bodies: list[tuple[str, str, Any]] = []
        # paths written with a protobuf body (request_bytes)
        self.protobuf_writes: list[str] = []
        # Keys of objects whose creator sent opaque parameters with whitespace: the real
        # server refuses every JSON write of their main resource (422), see docs/cluster.md.
        self.spaced: set[str] = set()
        # (method, path suffix) -> callable run before the request; may raise ApiError.
        self.before: dict[tuple[str, str], list[Callable[[], None]]] = {}
        # (method, path suffix) -> [(fault, applied)] (see fail())
        self.failures: dict[tuple[str, str], list[tuple[str, bool] | None]] = {}
        # (method, path, fault) of every failure injected
        self.injected: list[tuple[str, str, str]] = []
        self._names = itertools.count(1)
        self.lock = threading.RLock()  # reflector threads and the loop share the fake
        self._protobuf = False  # a protobuf PUT under way (keeps the creator's bytes)

    # ------------------------------------------------------------------ helpers for tests
    def create(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        res = RESOURCES[kind]
        ns = (obj.get("metadata") or {}).get("namespace") if res.namespaced else None
        out: dict[str, Any] = self.request("POST", res.collection(ns or "default" if res.namespaced
                                                                 else None), body=dict(obj))
        return out

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects[kind].get(key))

    def update(self, kind: str, obj: dict[str, Any], *, status: bool = False) -> dict[str, Any]:
        res = RESOURCES[kind]
        meta = obj["metadata"]
        out: dict[str, Any] = self.request(
            "PUT", res.item(meta["name"], meta.get("namespace"), "status" if status else ""), body=obj)
        return out

    def delete(self, kind: str, key: str) -> None:
        old = self.objects[kind].pop(key)
        self._record(kind, "DELETED", old)

    def on(self, method: str, suffix: str, fn: Callable[[], None]) -> None:
        self.before.setdefault((method, suffix), []).append(fn)

    def fail(self, method: str, suffix: str, fault: str, *, applied: bool = False,
             times: int = 1, after: int = 0) -> None:
        """Fail ``times`` requests ``method`` of a path ending in ``suffix``, after letting
        ``after`` of them pass: ``conflict`` (409), ``invalid`` (422), ``server-error``
        (500), ``timeout`` or ``reset`` (no answer: status 0, as the client reports a
        transport failure). ``applied``: the request is carried out before the answer
        is lost."""
        planned = self.failures.setdefault((method, suffix), [])
        planned.extend([None] * after)
        planned.extend([(fault, applied)] * times)

    def compact(self) -> None:
        self.compacted = self.rv

    # ------------------------------------------------------------------ the Api protocol
    def request(self, method: str, path: str, *, body: Any = None,
                query: Mapping[str, str] | None = None, content_type: str = "application/json",
                timeout: float | None = None) -> Any:
        with self.lock:
            self.timeouts.append((method, path, timeout))
            if body is not None:
                self.bodies.append((method, path, copy.deepcopy(body)))
            failure = self._failure(method, path)
            if failure is None:
                return self._request(method, path, body, query)
            fault, applied = failure
            self.injected.append((method, path, fault))
            if applied:
                self._request(method, path, body, query)
            raise _FAULTS[fault]

    def request_bytes(self, method: str, path: str, *, body: bytes | None = None,
                      content_type: str = "application/json", accept: str = "application/json",
                      timeout: float | None = None) -> bytes:
        """Protobuf as far as the adapter uses it: GET of one object and PUT of it back.
        The object is encoded with its spec and status as opaque JSON payloads; a PUT whose
        spec bytes differ from the stored spec is refused, as the real server does."""
        if method == "GET" and accept == protowire.CONTENT_TYPE:
            obj = self.request("GET", path, timeout=timeout)
            return _to_protobuf(obj)
        if method == "PUT" and content_type == protowire.CONTENT_TYPE and body is not None:
            with self.lock:
                kind, ns, name, _sub = self._parse(path)
                cur = self.objects[kind].get(f"{ns}/{name}" if ns else str(name))
                if cur is not None and _spec_bytes(body) != _json(cur.get("spec")):
                    raise ApiError(422, "Invalid", "spec: Invalid value: null: field is immutable")
                obj = copy.deepcopy(cur or {})
            obj.setdefault("metadata", {})["resourceVersion"] = protowire.resource_version(body)
            obj["metadata"]["finalizers"] = protowire.finalizers(body)
            self.protobuf_writes.append(path)
            self._protobuf = True
            try:
                return json.dumps(self.request("PUT", path, body=obj, timeout=timeout)).encode()
            finally:
                self._protobuf = False
        raise AssertionError(f"unexpected {method} {path} as {content_type} / {accept}")

    def _failure(self, method: str, path: str) -> tuple[str, bool] | None:
        for (m, suffix), planned in self.failures.items():
            if m == method and path.endswith(suffix) and planned:
                return planned.pop(0)  # None: this one passes
        return None

    def _request(self, method: str, path: str, body: Any, query: Mapping[str, str] | None) -> Any:
        self.requests.append((method, path))
        for (m, suffix), fns in list(self.before.items()):
            if m == method and path.endswith(suffix) and fns:
                fns.pop(0)()
        kind, ns, name, sub = self._parse(path)
        store = self.objects[kind]
        if method == "GET" and name is None:
            return self._list(kind, ns, query or {})
        if method == "POST" and name is None:
            return self._create(kind, ns, body)
        key = f"{ns}/{name}" if ns else str(name)
        if method == "POST" and sub == "binding":
            pod = store.get(key)
            if pod is None:
                raise ApiError(404, "NotFound", f"pods {name} not found")
            if pod["spec"].get("nodeName"):
                raise ApiError(409, "Conflict", f"pod {name} is already assigned")
            pod = copy.deepcopy(pod)
            pod["spec"]["nodeName"] = body["target"]["name"]
            return self._store(kind, key, pod, "MODIFIED")
        cur = store.get(key)
        if cur is None:
            raise ApiError(404, "NotFound", f"{kind} {key} not found")
        if method == "GET":
            return copy.deepcopy(cur)
        if method in ("PUT", "PATCH") and not sub and key in self.spaced \
                and not self._protobuf:
            raise ApiError(422, "Invalid", f"{kind} {name!r} is invalid: spec: Invalid value: "
                           "field is immutable")
        if method == "PUT":
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want and want != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "the object has been modified; please apply your "
                               "changes to the latest version and try again")
            new = copy.deepcopy(cur)
            if sub == "status":
                new["status"] = copy.deepcopy(body.get("status") or {})
            else:
                status = new.get("status")
                new = copy.deepcopy(body)
                if status is not None:
                    new["status"] = status
                else:
                    new.pop("status", None)
                new["metadata"]["uid"] = cur["metadata"]["uid"]
            if kind == "ResourceClaim":
                new["kind"] = "ResourceClaim"
            return self._store(kind, key, new, "MODIFIED")
        if method == "PATCH":
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want and want != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "the object has been modified")
            new = copy.deepcopy(cur)
            if sub == "status":
                _merge(new, {"status": body.get("status") or {}})
                if "finalizers" in (body.get("metadata") or {}):
                    raise ApiError(400, "BadRequest", "status patch may not change metadata")
            else:
                _merge(new, {k: v for k, v in body.items() if k != "status"})
            new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
            return self._store(kind, key, new, "MODIFIED")
        raise ApiError(405, "MethodNotAllowed", method)

    def watch(self, path: str, query: Mapping[str, str], timeout: float) -> Iterator[dict[str, Any]]:
        with self.lock:
            out = self._watch(path, query)
        if len(out) == 1:
            time.sleep(0.01)  # nothing new: a real watch would block; do not spin
        return iter(out)

    def _watch(self, path: str, query: Mapping[str, str]) -> list[dict[str, Any]]:
        kind, _ns, _name, _sub = self._parse(path)
        since = int(query.get("resourceVersion") or 0)
        if since < self.compacted:
            raise ApiError(410, "Gone", f"too old resource version: {since} ({self.compacted})")
        sel = query.get("fieldSelector")
        events = [(rv, t, o) for rv, k, t, o in self.history if k == kind and rv > since]
        out = [{"type": t, "object": copy.deepcopy(o)} for _rv, t, o in events
               if _selected(o, sel)]
        out.append({"type": "BOOKMARK", "object": {"kind": kind,
                                                    "metadata": {"resourceVersion": str(self.rv)}}})
        return out

    # ------------------------------------------------------------------ internals
    def _parse(self, path: str) -> tuple[str, str | None, str | None, str]:
        parts = [p for p in path.split("/") if p]
        parts = parts[2:] if parts[0] == "api" else parts[3:]
        ns = None
        if parts[0] == "namespaces" and len(parts) >= 3:
            ns = parts[1]
            parts = parts[2:]
        res = _BY_PLURAL[parts[0]]
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else ""
        return res.kind, ns, name, sub

    def _list(self, kind: str, ns: str | None, query: Mapping[str, str]) -> dict[str, Any]:
        items = [copy.deepcopy(o) for k, o in sorted(self.objects[kind].items())
                 if (ns is None or k.startswith(f"{ns}/")) and _selected(o, query.get("fieldSelector"))]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items)
        page = items[start:start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        for o in page:
            o.pop("kind", None)  # lists carry kind only on the list
        return {"kind": f"{kind}List", "metadata": meta, "items": page}

    def _create(self, kind: str, ns: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._names):05d}"
        if ns:
            meta["namespace"] = ns
        key = f"{ns}/{meta['name']}" if ns else meta["name"]
        if key in self.objects[kind]:
            raise ApiError(409, "AlreadyExists", f"{kind} {key} already exists")
        meta["uid"] = f"uid-{kind.lower()}-{meta['name']}"
        obj["kind"] = kind
        return self._store(kind, key, obj, "ADDED")

    def _store(self, kind: str, key: str, obj: dict[str, Any], typ: str) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"].setdefault("managedFields", [{"manager": "fake", "operation": "Update"}])
        self.objects[kind][key] = obj
        self._record(kind, typ, obj)
        return copy.deepcopy(obj)

    def _record(self, kind: str, typ: str, obj: dict[str, Any]) -> None:
        if typ == "DELETED":
            self.rv += 1
        self.history.append((self.rv, kind, typ, copy.deepcopy(obj)))


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def _to_protobuf(obj: Mapping[str, Any]) -> bytes:
    """metadata (name 1, namespace 3, resourceVersion 6, finalizers 14, and an opaque
    field 17 standing for managedFields), spec 2 and status 3 as JSON payloads."""
    field = protowire._len_field
    meta = obj.get("metadata") or {}
    encoded = field(1, meta.get("name", "").encode()) + field(3, meta.get("namespace", "").encode())
    encoded += field(6, str(meta.get("resourceVersion", "")).encode())
    encoded += b"".join(field(14, f.encode()) for f in meta.get("finalizers") or ())
    encoded += field(17, b"managed")
    raw = field(1, encoded) + field(2, _json(obj.get("spec"))) + field(3, _json(obj.get("status")))
    return protowire.MAGIC + field(1, b"typemeta") + field(2, raw)


def _spec_bytes(envelope: bytes) -> bytes:
    raw = protowire._get(envelope[len(protowire.MAGIC):], 2)
    return protowire._get(raw, 2)


_FAULTS = {
    "conflict": ApiError(409, "Conflict", "the object has been modified; please apply your "
                         "changes to the latest version and try again"),
    "invalid": ApiError(422, "Invalid", "the request is invalid"),
    "server-error": ApiError(500, "InternalError", "etcdserver: request timed out"),
    "timeout": ApiError(0, "ReadTimeoutError", "Read timed out. (read timeout=30.0)"),
    "reset": ApiError(0, "ProtocolError", "('Connection aborted.', ConnectionResetError(104, "
                      "'Connection reset by peer'))"),
}


def _selected(obj: Mapping[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        negate = "!=" in term
        field, _, value = term.partition("!=" if negate else "=")
        section, _, name = field.partition(".")
        have = (obj.get(section) or {}).get(name) or ""
        if (have == value) == negate:
            return False
    return True


def _merge(dst: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for k, v in patch.items():
        if isinstance(v, Mapping) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        elif v is None:
            dst.pop(k, None)
        else:
            dst[k] = copy.deepcopy(v)
