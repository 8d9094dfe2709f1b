"""A Kubernetes API server stand-in for DeciceJobs, served over HTTP on 127.0.0.1.

Speaks the REST dialect the official ``kubernetes`` client uses for a custom
resource with a status subresource, under
``/apis/dev.decice.com/v1alpha1[/namespaces/<ns>]/decicejobs[/<name>[/status]]``:
create (POST), get, list (``labelSelector``, ``fieldSelector`` on
``metadata.name``/``metadata.namespace``), watch (``watch=true`` with
``resourceVersion``, ``timeoutSeconds``, ``allowWatchBookmarks``; chunked JSON
lines), merge patch, replace (with resourceVersion preconditions), delete
(``propagationPolicy`` recorded; finalizers honoured through
``deletionTimestamp``), errors as ``metav1.Status``.  Every write bumps one
global resourceVersion and appends an event; ``compact()`` forgets the history
so that older resourceVersions answer ``410 Gone`` like a compacted etcd.

Faults are injected per request (``inject``): any HTTP status (with
``Retry-After``), a dropped connection, or a watch cut off after N events.
Everything is bounded in time: a watch stays open at most ``hold`` seconds.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from hooks.timeutil import format_time, utc_now

GROUP, VERSION, PLURAL, KIND = "dev.decice.com", "v1alpha1", "decicejobs", "DeciceJob"
RESOURCE = f"{PLURAL}.{GROUP}"
_ROUTE = re.compile(
    rf"^/apis/{re.escape(GROUP)}/{VERSION}(?:/namespaces/(?P<ns>[^/]+))?/{PLURAL}"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>status))?)?/?$"
)
REASONS = {400: "BadRequest", 401: "Unauthorized", 404: "NotFound", 405: "MethodNotAllowed", 409: "Conflict",
           410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


class ApiStatus(Exception):
    """An error answer, rendered as a metav1.Status."""

    def __init__(self, code: int, message: str, reason: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.headers = headers or {}

    def body(self) -> dict:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}


# --- selectors ------------------------------------------------------------------------

_TERM = re.compile(
    r"^\s*(?:!\s*(?P<absent>[\w./-]+)"
    r"|(?P<key>[\w./-]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[\w.-]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)\s*$"
)


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [t for t in terms + [current] if t.strip()]


def label_matcher(selector: str | None) -> Callable[[dict], bool]:
    """A label selector (``a=b,c!=d,e in (f,g),h notin (i),j,!k``) as a predicate on labels."""
    checks = []
    for term in _split_terms(selector or ""):
        m = _TERM.match(term)
        if not m:
            raise ApiStatus(400, f"unable to parse requirement: {term!r}")
        if m["absent"]:
            checks.append(lambda labels, k=m["absent"]: k not in labels)
        elif m["set"]:
            values = {v.strip() for v in m["values"].split(",") if v.strip()}
            wanted = m["set"] == "in"
            checks.append(lambda labels, k=m["key"], vs=values, w=wanted: (labels.get(k) in vs) == w
                          if k in labels else not w)
        elif m["op"]:
            equal = m["op"] != "!="
            checks.append(lambda labels, k=m["key"], v=m["value"], e=equal: (labels.get(k) == v) == e)
        else:
            checks.append(lambda labels, k=m["key"]: k in labels)
    return lambda labels: all(check(labels) for check in checks)


def field_matcher(selector: str | None) -> Callable[[dict], bool]:
    """A field selector on ``metadata.name`` / ``metadata.namespace`` (``=``, ``==``, ``!=``)."""
    checks = []
    for term in _split_terms(selector or ""):
        m = re.match(r"^\s*(metadata\.name|metadata\.namespace)\s*(==|=|!=)\s*([\w.-]*)\s*$", term)
        if not m:
            raise ApiStatus(400, f'field label not supported: "{term.strip()}"')
        attr, op, value = m.groups()
        checks.append(lambda obj, a=attr.split(".")[1], v=value, e=op != "!=": (obj["metadata"].get(a) == v) == e)
    return lambda obj: all(check(obj) for check in checks)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- the store --------------------------------------------------------------------------


@dataclass
class Event:
    revision: int
    type: str
    object: dict


class Store:
    """DeciceJobs by (namespace, name), one resourceVersion counter, and the event history."""

    def __init__(self, admit: Callable[[dict], tuple[dict, list[str]]] | None = None,
                 now: Callable[[], datetime] = utc_now):
        self.changed = threading.Condition()
        self.objects: dict[tuple[str, str], dict] = {}
        self.events: list[Event] = []
        self.revision = 0
        self.compacted = 0
        self.closed = False
        self.admit = admit
        self.now = now
        self.deletions: list[tuple[str, str, str | None]] = []

    def _record(self, kind: str, obj: dict) -> dict:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self.events.append(Event(self.revision, kind, copy.deepcopy(obj)))
        self.changed.notify_all()
        return copy.deepcopy(obj)

    def _find(self, namespace: str, name: str) -> dict:
        obj = self.objects.get((namespace, name))
        if obj is None:
            raise ApiStatus(404, f'{RESOURCE} "{name}" not found')
        return obj

    def _admit(self, obj: dict) -> dict:
        if self.admit is None:
            return obj
        admitted, errors = self.admit(obj)
        if errors:
            raise ApiStatus(422, f'{KIND}.{GROUP} "{obj["metadata"].get("name")}" is invalid: {"; ".join(errors)}')
        return admitted

    def create(self, namespace: str, body: dict) -> dict:
        with self.changed:
            if body.get("apiVersion") != f"{GROUP}/{VERSION}" or body.get("kind") != KIND:
                raise ApiStatus(400, f"the object must be a {KIND} of {GROUP}/{VERSION}")
            meta = body.setdefault("metadata", {})
            if meta.get("namespace", namespace) != namespace:
                raise ApiStatus(400, "the namespace of the provided object does not match the namespace sent on the request")
            name = meta.get("name")
            if not name:
                raise ApiStatus(422, f"{KIND}.{GROUP} is invalid: metadata.name: Required value")
            if (namespace, name) in self.objects:
                raise ApiStatus(409, f'{RESOURCE} "{name}" already exists', "AlreadyExists")
            obj = {k: v for k, v in body.items() if k != "status"}
            obj["metadata"] = {k: v for k, v in meta.items() if k not in ("uid", "resourceVersion", "generation",
                                                                          "creationTimestamp", "deletionTimestamp")}
            obj["metadata"]["namespace"] = namespace
            obj = self._admit(obj)
            obj["metadata"].update(uid=str(uuid.uuid4()), generation=1, creationTimestamp=format_time(self.now()))
            self.objects[(namespace, name)] = obj
            return self._record("ADDED", obj)

    def get(self, namespace: str, name: str) -> dict:
        with self.changed:
            return copy.deepcopy(self._find(namespace, name))

    def list(self, namespace: str | None, labels: str | None = None, fields: str | None = None) -> dict:
        match_labels, match_fields = label_matcher(labels), field_matcher(fields)
        with self.changed:
            items = [copy.deepcopy(obj) for (ns, _), obj in sorted(self.objects.items())
                     if namespace in (None, ns) and match_labels(obj["metadata"].get("labels") or {})
                     and match_fields(obj)]
            return {"apiVersion": f"{GROUP}/{VERSION}", "kind": f"{KIND}List",
                    "metadata": {"resourceVersion": str(self.revision)}, "items": items}

    def _store(self, old: dict, new: dict, subresource: str | None) -> dict:
        """Write ``new`` over ``old`` the way the status subresource splits them; no-op writes
        keep the resourceVersion."""
        if subresource == "status":
            updated = copy.deepcopy(old)
            updated["status"] = new.get("status")
        else:
            updated = {k: v for k, v in new.items() if k != "status"}
            if "status" in old:
                updated["status"] = old["status"]
            keep = ("uid", "generation", "creationTimestamp", "deletionTimestamp", "resourceVersion", "name",
                    "namespace")
            updated["metadata"] = {**{k: v for k, v in (new.get("metadata") or {}).items() if k not in keep},
                                   **{k: old["metadata"][k] for k in keep if k in old["metadata"]}}
            if updated.get("spec") != old.get("spec"):
                updated = self._admit(updated)
                updated["metadata"]["generation"] = old["metadata"]["generation"] + 1
        key = (old["metadata"]["namespace"], old["metadata"]["name"])
        if updated == old:
            return copy.deepcopy(old)
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get("finalizers"):
            del self.objects[key]
            return self._record("DELETED", updated)
        self.objects[key] = updated
        return self._record("MODIFIED", updated)

    def patch(self, namespace: str, name: str, patch: Any, subresource: str | None = None) -> dict:
        if not isinstance(patch, dict):
            raise ApiStatus(400, "a merge patch must be a JSON object")
        with self.changed:
            old = self._find(namespace, name)
            return self._store(old, merge_patch(old, patch), subresource)

    def replace(self, namespace: str, name: str, body: dict, subresource: str | None = None) -> dict:
        with self.changed:
            old = self._find(namespace, name)
            version = (body.get("metadata") or {}).get("resourceVersion")
            if version and version != old["metadata"]["resourceVersion"]:
                raise ApiStatus(409, f'Operation cannot be fulfilled on {RESOURCE} "{name}": the object has been '
                                     "modified; please apply your changes to the latest version and try again")
            return self._store(old, body, subresource)

    def update_status(self, namespace: str, name: str, status: dict) -> dict:
        """What a controller does after a sync: write the status subresource."""
        return self.replace(namespace, name, {"status": status}, "status")

    def delete(self, namespace: str, name: str, propagation: str | None = None) -> dict:
        with self.changed:
            obj = self._find(namespace, name)
            self.deletions.append((namespace, name, propagation))
            if obj["metadata"].get("finalizers"):
                if not obj["metadata"].get("deletionTimestamp"):
                    obj["metadata"]["deletionTimestamp"] = format_time(self.now())
                    return self._record("MODIFIED", obj)
                return copy.deepcopy(obj)
            del self.objects[(namespace, name)]
            return self._record("DELETED", obj)

    def compact(self) -> None:
        """Forget the history: watches from an older resourceVersion get 410 Gone."""
        with self.changed:
            self.compacted = self.revision
            self.events.clear()

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()


# --- faults ------------------------------------------------------------------------------


@dataclass
class Fault:
    """Answer the next ``times`` matching requests with ``status`` (a Status body, optional
    Retry-After), or drop the connection (``disconnect``); a watch with ``after_events`` set is
    answered 200 and cut off after that many events."""

    status: int | None = None
    method: str | None = None
    path: str | None = None
    watch: bool | None = None
    times: int = 1
    retry_after: str | None = None
    message: str = "injected failure"
    disconnect: bool = False
    after_events: int | None = None

    def matches(self, method: str, path: str, watching: bool) -> bool:
        return ((self.method is None or self.method == method) and (self.path is None or self.path in path)
                and (self.watch is None or self.watch == watching))


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)  # lowercase names


class APIServer:
    """The stand-in, serving on 127.0.0.1 in daemon threads; use as a context manager."""

    def __init__(self, *, token: str | None = "test-token", hold: float = 5.0,
                 admit: Callable[[dict], tuple[dict, list[str]]] | None = None,
                 now: Callable[[], datetime] = utc_now):
        self.store = Store(admit, now)
        self.token = token
        self.hold = hold
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self._lock = threading.Condition()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> APIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.store.close()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def inject(self, status: int | None = None, **kwargs: Any) -> Fault:
        fault = Fault(status=status, **kwargs)
        with self._lock:
            self.faults.append(fault)
        return fault

    def _take_fault(self, method: str, path: str, watching: bool) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and fault.matches(method, path, watching):
                    fault.times -= 1
                    return fault
        return None

    def log(self, method: str | None = None, watch: bool | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if (method is None or r.method == method)
                    and (watch is None or (r.query.get("watch") == "true") == watch)]

    def wait_for(self, predicate: Callable[[Request], bool], timeout: float = 10.0) -> Request:
        """Block until a request matching ``predicate`` has arrived (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = next((r for r in self.requests if predicate(r)), None)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("no such request arrived")
                self._lock.wait(remaining)

    def kubeconfig(self, path: Path, namespace: str | None = None) -> Path:
        """A kubeconfig whose current context points at this server (with its bearer token)."""
        context: dict[str, Any] = {"cluster": "standin", "user": "tester"}
        if namespace:
            context["namespace"] = namespace
        user = {"token": self.token} if self.token else {}
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": user}],
            "contexts": [{"name": "standin", "context": context}],
        }))
        return path


def _handler(server: APIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        api = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    api: APIServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # --- plumbing -------------------------------------------------------------------

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiStatus(400, "the request body is not JSON") from None

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        watching = method == "GET" and query.get("watch") == "true"
        with self.api._lock:
            self.api.requests.append(Request(method, url.path, query, {k.lower(): v for k, v in self.headers.items()}))
            self.api._lock.notify_all()
        try:
            body = self._body()
            if self.api.token and self.headers.get("Authorization") != f"Bearer {self.api.token}":
                raise ApiStatus(401, "Unauthorized")
            fault = self.api._take_fault(method, url.path, watching)
            if fault is not None and not (watching and fault.after_events is not None):
                if fault.disconnect:
                    return self._drop()
                headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
                raise ApiStatus(fault.status or 500, fault.message, headers=headers)
            route = _ROUTE.match(url.path)
            if route is None:
                raise ApiStatus(404, "the server could not find the requested resource")
            if watching:
                return self._watch(route["ns"], query, fault)
            self._send_json(*self._dispatch(method, route["ns"], route["name"], route["sub"], query, body))
        except ApiStatus as status:
            self._send_json(status.code, status.body(), status.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _dispatch(self, method: str, namespace: str | None, name: str | None, sub: str | None,
                  query: dict[str, str], body: Any) -> tuple[int, Any]:
        store = self.api.store
        if name is None:
            if method == "GET":
                return 200, store.list(namespace, query.get("labelSelector"), query.get("fieldSelector"))
            if method == "POST" and namespace and sub is None:
                if not isinstance(body, dict):
                    raise ApiStatus(400, "the request body must be an object")
                return 201, store.create(namespace, body)
            raise ApiStatus(405, f"{method} is not supported here")
        if namespace is None:
            raise ApiStatus(404, "the server could not find the requested resource")
        if method == "GET":
            return 200, store.get(namespace, name)
        if method == "PATCH":
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if content_type != "application/merge-patch+json":
                raise ApiStatus(415, f"the body of the request was in an unknown format: {content_type}")
            return 200, store.patch(namespace, name, body, sub)
        if method == "PUT":
            if not isinstance(body, dict):
                raise ApiStatus(400, "the request body must be an object")
            return 200, store.replace(namespace, name, body, sub)
        if method == "DELETE" and sub is None:
            options = body if isinstance(body, dict) else {}
            propagation = query.get("propagationPolicy") or options.get("propagationPolicy")
            deleted = store.delete(namespace, name, propagation)
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "details": {"name": name, "group": GROUP, "kind": PLURAL,
                                     "uid": deleted["metadata"]["uid"]}}
        raise ApiStatus(405, f"{method} is not supported here")

    # --- watch ----------------------------------------------------------------------

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, kind: str, obj: dict) -> None:
        self._chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

    def _watch(self, namespace: str | None, query: dict[str, str], fault: Fault | None) -> None:
        store = self.api.store
        match_labels, match_fields = label_matcher(query.get("labelSelector")), field_matcher(query.get("fieldSelector"))
        version = query.get("resourceVersion") or "0"
        try:
            timeout = float(query.get("timeoutSeconds") or self.api.hold)
            cursor = int(version)
        except ValueError:
            raise ApiStatus(400, f"invalid resourceVersion or timeoutSeconds: {query}") from None
        deadline = time.monotonic() + min(timeout, self.api.hold)

        def wanted(obj: dict) -> bool:
            return (namespace in (None, obj["metadata"]["namespace"])
                    and match_labels(obj["metadata"].get("labels") or {}) and match_fields(obj))

        self.send_response(200)
        self.send_header("Content-Type", "application/json;stream=watch")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        budget = fault.after_events if fault is not None else None
        if budget == 0:
            return self._drop()
        with store.changed:
            initial = [o for _, o in sorted(store.objects.items()) if wanted(o)] if cursor == 0 else []
            cursor = cursor or store.revision
            initial = copy.deepcopy(initial)
        for batch in itertools.chain([[Event(0, "ADDED", o) for o in initial]], self._batches(store, cursor, deadline)):
            for event in batch:
                if event.type == "ERROR":
                    self._event("ERROR", event.object)
                    return self._end()
                if not wanted(event.object):
                    continue
                self._event(event.type, event.object)
                if budget is not None:
                    budget -= 1
                    if budget == 0:
                        return self._drop()
        if query.get("allowWatchBookmarks") == "true":
            with store.changed:
                revision = store.revision
            self._event("BOOKMARK", {"kind": KIND, "apiVersion": f"{GROUP}/{VERSION}",
                                     "metadata": {"resourceVersion": str(revision)}})
        self._end()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @staticmethod
    def _batches(store: Store, cursor: int, deadline: float) -> Iterator[list[Event]]:
        """Events after ``cursor`` as they happen, until ``deadline``; a 410 ERROR if the history
        the watch needs has been compacted away."""
        while True:
            with store.changed:
                compacted = store.compacted
                fresh = [e for e in store.events if e.revision > cursor]
                if cursor >= compacted and not fresh:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or store.closed:
                        return
                    store.changed.wait(min(remaining, 0.1))
                    continue
            if cursor < compacted:
                yield [Event(0, "ERROR", ApiStatus(410, f"too old resource version: {cursor} ({compacted})").body())]
                return
            cursor = fresh[-1].revision
            yield fresh


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def standin(crd_validator) -> Iterator[APIServer]:
    """The stand-in, admitting DeciceJobs the way the API server does with the project's CRD
    (defaults applied, schema and CEL rules checked)."""

    def admit(obj: dict) -> tuple[dict, list[str]]:
        return crd_validator.defaulted(obj), crd_validator.errors(obj)

    with APIServer(admit=admit) as server:
        yield server


@pytest.fixture
def kubeconfig(standin: APIServer, tmp_path: Path) -> Path:
    """A kubeconfig pointing at the stand-in, context namespace ``team-a``."""
    return standin.kubeconfig(tmp_path / "kubeconfig", namespace="team-a")
