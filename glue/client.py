"""``DeciceJobClient``: DeciceJobs through the official ``kubernetes`` client.

Every call goes through ``CustomObjectsApi`` and one retry loop: 429 (waiting
as long as ``Retry-After`` asks), 5xx and connection errors are retried with
capped exponential back-off; other 4xx are not.  Failures surface as the
glue's own exceptions carrying the API server's message.  ``watch`` resumes
from the last resourceVersion after a disconnect and re-lists after
``410 Gone``; ``wait`` is built on it.  Time is injectable (``sleep``,
``clock``, ``now``) so that back-offs and deadlines can be tested without
waiting.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.watch.watch import iter_resp_lines

from glue.errors import (
    ApiError,
    ConfigError,
    Conflict,
    ConnectionFailed,
    GlueError,
    InvalidJob,
    NotFound,
    Rejected,
    SpecConflict,
    WaitTimeout,
)
from glue.statuses import is_finished, ttl_expired
from hooks import names
from hooks.model import InvalidSpec, parse_job, parse_spec
from hooks.timeutil import utc_now

VERSION = names.API_VERSION.split("/")[1]
PLURAL = "decicejobs"
RESOURCE = f"{PLURAL}.{names.GROUP}"
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class RetryPolicy:
    """Retry ``attempts`` times in all, waiting ``base_delay * 2**n`` (at most ``max_delay``)
    before retry ``n``, or what ``Retry-After`` asks (at most ``max_retry_after``)."""

    attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 300.0

    def delay(self, retry: int) -> float:
        return min(self.max_delay, self.base_delay * 2 ** retry)


class WatchEvent(NamedTuple):
    type: str  # ADDED, MODIFIED or DELETED
    object: dict


class Submission(NamedTuple):
    job: dict
    created: bool  # False: the same job existed already


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def api_error(exc: k8s.ApiException) -> ApiError:
    """The glue's exception for an API error response, with the API's own message."""
    status = exc.status or 0
    body: Any = None
    try:
        body = json.loads(exc.body) if exc.body else None
    except ValueError:
        pass
    body = body if isinstance(body, dict) else {}
    message = _one_line(body.get("message") or exc.body or exc.reason or "no message")
    reason = str(body.get("reason") or exc.reason or "")
    kind = {404: NotFound, 409: Conflict, 400: Rejected, 422: Rejected}.get(status, ApiError)
    return kind(status, reason, message)


def retry_after(headers: Mapping[str, str] | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date)."""
    value = (headers or {}).get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now).total_seconds())
    except (TypeError, ValueError):
        return None


def _retryable(status: int) -> bool:
    return status == 429 or 500 <= status <= 599


def _meta(obj: Mapping[str, Any]) -> dict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return _meta(obj).get("namespace", ""), _meta(obj).get("name", "")


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> tuple[k8s.ApiClient, str | None]:
    """An ApiClient and the namespace of its context, from (in this order) ``kubeconfig``, the
    ``KUBECONFIG`` variable, the in-cluster service account, or ``~/.kube/config``.  Our own retry
    loop replaces urllib3's (``retries = 0``)."""
    configuration = k8s.Configuration()
    namespace = None
    try:
        if kubeconfig is None and context is None and not os.environ.get("KUBECONFIG") and os.environ.get(
                "KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
            if IN_CLUSTER_NAMESPACE.is_file():
                namespace = IN_CLUSTER_NAMESPACE.read_text().strip() or None
        else:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                        client_configuration=configuration, persist_config=False)
            contexts, current = k8s_config.list_kube_config_contexts(kubeconfig)
            chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
            namespace = ((chosen or {}).get("context") or {}).get("namespace")
    except Exception as exc:  # the loaders raise many types (ConfigException, OSError, YAML errors)
        raise ConfigError(f"cannot load the cluster configuration: {_one_line(exc)}") from None
    configuration.retries = 0
    return k8s.ApiClient(configuration), namespace


class DeciceJobClient:
    """Submit, read, watch, wait for and delete DeciceJobs."""

    def __init__(
        self,
        api_client: k8s.ApiClient | None = None,
        *,
        namespace: str | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        request_timeout: float = 30.0,
        watch_timeout: int = 300,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = utc_now,
    ):
        """``api_client``: use this ApiClient as it is; otherwise load a configuration (see
        ``load_api_client``).  ``namespace`` defaults to the context's, else ``default``.
        ``request_timeout``: seconds per request; ``watch_timeout``: longest single watch
        request before it is renewed."""
        context_namespace = None
        if api_client is None:
            api_client, context_namespace = load_api_client(kubeconfig, context)
        self.api = k8s.CustomObjectsApi(api_client)
        self.namespace = namespace or context_namespace or "default"
        self.retry = retry
        self.request_timeout = request_timeout
        self.watch_timeout = watch_timeout
        self._sleep = sleep
        self._clock = clock
        self._now = now

    # --- the retry loop ---------------------------------------------------------

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("_request_timeout", self.request_timeout)
        attempt = 0
        while True:
            try:
                return method(names.GROUP, VERSION, *args, **kwargs)
            except k8s.ApiException as exc:
                if not exc.status:
                    raise ConnectionFailed(f"cannot talk to the API server: {_one_line(exc.reason)}") from None
                error: GlueError = api_error(exc)
                if not _retryable(exc.status):
                    raise error from None
                asked = retry_after(exc.headers, self._now())
                delay = self.retry.delay(attempt) if asked is None else min(asked, self.retry.max_retry_after)
            except urllib3.exceptions.HTTPError as exc:
                cause = getattr(exc, "reason", None) or exc
                error = ConnectionFailed(f"cannot reach the API server: {_one_line(cause)}")
                delay = self.retry.delay(attempt)
            attempt += 1
            if attempt >= self.retry.attempts:
                raise error
            self._sleep(delay)

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    # --- reading ------------------------------------------------------------------

    def get(self, name: str, namespace: str | None = None) -> dict:
        return self._call(self.api.get_namespaced_custom_object, self._ns(namespace), PLURAL, name)

    def _list(self, namespace: str | None, all_namespaces: bool = False, **selectors: Any) -> dict:
        selectors = {k: v for k, v in selectors.items() if v is not None}
        if all_namespaces:
            return self._call(self.api.list_cluster_custom_object, PLURAL, **selectors)
        return self._call(self.api.list_namespaced_custom_object, self._ns(namespace), PLURAL, **selectors)

    def list(self, namespace: str | None = None, *, label_selector: str | None = None,
             all_namespaces: bool = False) -> list[dict]:
        """DeciceJobs in ``namespace`` (or all namespaces) matching ``label_selector``."""
        return list(self._list(namespace, all_namespaces, label_selector=label_selector).get("items") or [])

    # --- writing ------------------------------------------------------------------

    def submit(self, manifest: Mapping[str, Any], namespace: str | None = None) -> Submission:
        """Create the DeciceJob ``manifest``.  If a job of that name exists with the same spec (as
        the hooks read it, defaults applied) and labels/annotations, nothing happens; with another
        spec, :class:`SpecConflict`.  The manifest is validated locally first (:class:`InvalidJob`)."""
        body = json.loads(json.dumps(manifest))
        meta = body.setdefault("metadata", {})
        if namespace and meta.get("namespace") not in (None, namespace):
            raise InvalidJob([f"metadata.namespace: {meta['namespace']!r} differs from the namespace {namespace!r}"])
        meta["namespace"] = meta.get("namespace") or self._ns(namespace)
        try:
            desired = parse_job(body)
        except InvalidSpec as exc:
            raise InvalidJob(exc.errors) from None
        try:
            return Submission(self._call(self.api.create_namespaced_custom_object, meta["namespace"], PLURAL, body), True)
        except Conflict:
            existing = self.get(desired.name, desired.namespace)
        where = f"{RESOURCE} {desired.namespace}/{desired.name}"
        if _meta(existing).get("deletionTimestamp"):
            raise Conflict(409, "AlreadyExists", f"{where} is being deleted; submit it again once it is gone")
        try:
            same = parse_spec(desired.name, existing.get("spec")) == desired.spec
        except InvalidSpec:
            same = False
        for field in ("labels", "annotations"):
            theirs = _meta(existing).get(field) or {}
            same = same and all(theirs.get(k) == v for k, v in (meta.get(field) or {}).items())
        if not same:
            raise SpecConflict(409, "AlreadyExists", f"{where} already exists with a different spec or metadata")
        return Submission(existing, False)

    def delete(self, name: str, namespace: str | None = None, propagation: str = "Background") -> dict:
        """Delete the DeciceJob; ``propagation`` (Background, Foreground, Orphan) decides what
        happens to its children.  Returns once the API server accepted the deletion."""
        if propagation not in PROPAGATION_POLICIES:
            raise ValueError(f"propagation must be one of {', '.join(PROPAGATION_POLICIES)}")
        return self._call(self.api.delete_namespaced_custom_object, self._ns(namespace), PLURAL, name,
                          propagation_policy=propagation)

    def gc(self, namespace: str | None = None, *, all_namespaces: bool = False, label_selector: str | None = None,
           dry_run: bool = False) -> list[dict]:
        """Delete finished jobs whose ``ttlSecondsAfterFinished`` has passed since their
        ``status.completionTime``; returns them (``dry_run``: only returns them)."""
        now = self._now()
        expired = [j for j in self.list(namespace, label_selector=label_selector, all_namespaces=all_namespaces)
                   if ttl_expired(j, now)]
        if dry_run:
            return expired
        deleted = []
        for job in expired:
            ns, name = _key(job)
            try:
                self.delete(name, ns)
            except NotFound:
                continue
            deleted.append(job)
        return deleted

    # --- watching -----------------------------------------------------------------

    def _remaining(self, deadline: float | None) -> float | None:
        return None if deadline is None else deadline - self._clock()

    def _open_watch(self, namespace: str | None, all_namespaces: bool, resource_version: str,
                    selectors: dict[str, str | None], remaining: float | None) -> Any:
        """One watch request: the server ends it after ``timeout_seconds``; the client-side read
        timeout fires only after ``remaining`` seconds without data, i.e. past the deadline."""
        server_timeout = self.watch_timeout if remaining is None else max(1, min(self.watch_timeout, math.ceil(remaining)))
        read_timeout = server_timeout + 10.0 if remaining is None else max(0.05, min(server_timeout + 10.0, remaining))
        return self._list(namespace, all_namespaces, watch=True, allow_watch_bookmarks=True,
                          resource_version=resource_version, timeout_seconds=server_timeout,
                          _preload_content=False, _request_timeout=(self.request_timeout, read_timeout), **selectors)

    @staticmethod
    def _events(response: Any) -> Iterator[tuple[str, dict]]:
        for line in iter_resp_lines(response):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                raise urllib3.exceptions.ProtocolError(f"malformed watch event: {line[:200]}") from None
            if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                raise urllib3.exceptions.ProtocolError(f"malformed watch event: {line[:200]}")
            yield str(event.get("type")), event["object"]

    def watch(self, namespace: str | None = None, *, name: str | None = None, label_selector: str | None = None,
              resource_version: str | None = None, timeout: float | None = None,
              all_namespaces: bool = False) -> Iterator[WatchEvent]:
        """Changes to DeciceJobs as ``WatchEvent(type, object)``, until ``timeout`` seconds have
        passed (forever when None).  Without ``resource_version`` the current jobs come first as
        ADDED.  Disconnects resume from the last resourceVersion seen; when that is too old (410
        Gone) the jobs are listed again and the differences reported as events."""
        selectors = {"label_selector": label_selector, "field_selector": f"metadata.name={name}" if name else None}
        deadline = None if timeout is None else self._clock() + timeout
        known: dict[tuple[str, str], dict] = {}
        if resource_version is None:
            resource_version, events = self._resync(namespace, all_namespaces, selectors, known)
            yield from events
        yield from self._follow(namespace, all_namespaces, selectors, resource_version, deadline, known)

    def _resync(self, namespace: str | None, all_namespaces: bool, selectors: dict[str, str | None],
                known: dict[tuple[str, str], dict]) -> tuple[str, list[WatchEvent]]:
        """List again; the events that turn ``known`` into what is there now."""
        listing = self._list(namespace, all_namespaces, **selectors)
        current = {_key(obj): obj for obj in listing.get("items") or []}
        events = []
        for key in sorted(current):
            before = known.get(key)
            if before is None:
                events.append(WatchEvent("ADDED", current[key]))
            elif _meta(before).get("resourceVersion") != _meta(current[key]).get("resourceVersion"):
                events.append(WatchEvent("MODIFIED", current[key]))
        events += [WatchEvent("DELETED", known[key]) for key in sorted(set(known) - set(current))]
        known.clear()
        known.update(current)
        return str(_meta(listing).get("resourceVersion") or ""), events

    def _follow(self, namespace: str | None, all_namespaces: bool, selectors: dict[str, str | None],
                resource_version: str, deadline: float | None,
                known: dict[tuple[str, str], dict]) -> Iterator[WatchEvent]:
        failures = 0
        while True:
            remaining = self._remaining(deadline)
            if remaining is not None and remaining <= 0:
                return
            response = None
            try:
                response = self._open_watch(namespace, all_namespaces, resource_version, selectors, remaining)
                for kind, obj in self._events(response):
                    failures = 0
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            raise _Expired()
                        raise ApiError(int(obj.get("code") or 0), str(obj.get("reason") or ""),
                                       _one_line(obj.get("message") or "watch error"))
                    resource_version = str(_meta(obj).get("resourceVersion") or resource_version)
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        known.pop(_key(obj), None)
                    else:
                        known[_key(obj)] = obj
                    yield WatchEvent(kind, obj)
            except (_Expired, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status != 410:
                    raise
                resource_version, events = self._resync(namespace, all_namespaces, selectors, known)
                yield from events
            except urllib3.exceptions.HTTPError as exc:
                remaining = self._remaining(deadline)
                if remaining is not None and remaining <= 0:
                    return
                failures += 1
                if failures >= self.retry.attempts:
                    raise ConnectionFailed(f"the watch keeps breaking off: {_one_line(exc)}") from None
                self._sleep(self.retry.delay(failures - 1))
            finally:
                if response is not None:
                    response.close()
                    response.release_conn()

    def wait(self, name: str, namespace: str | None = None, timeout: float | None = None) -> dict:
        """Block until the DeciceJob has finished (phase Succeeded or Failed) and return it.
        Raises :class:`NotFound` if it does not exist or is deleted meanwhile, and
        :class:`WaitTimeout` after ``timeout`` seconds (None: no limit)."""
        ns = self._ns(namespace)
        deadline = None if timeout is None else self._clock() + timeout
        selectors = {"label_selector": None, "field_selector": f"metadata.name={name}"}
        known: dict[tuple[str, str], dict] = {}
        resource_version, _ = self._resync(ns, False, selectors, known)
        job = known.get((ns, name))
        if job is None:
            raise NotFound(404, "NotFound", f'{RESOURCE} "{name}" not found in namespace {ns}')
        if is_finished(job):
            return job
        for event in self._follow(ns, False, selectors, resource_version, deadline, known):
            if event.type == "DELETED":
                raise NotFound(404, "NotFound", f'{RESOURCE} "{name}" was deleted while waiting for it')
            job = event.object
            if is_finished(job):
                return job
        phase = (job.get("status") or {}).get("phase") or "unknown"
        raise WaitTimeout(f"timed out after {timeout:g}s waiting for {RESOURCE} {ns}/{name} (phase {phase})", job)
