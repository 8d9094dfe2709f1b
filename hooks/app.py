"""The Flask layer: HTTP in, ``hooks.sync.handle`` in the middle, JSON out.

``gunicorn 'hooks.app:create_app()'`` serves it (settings from the
environment); ``decice-hooks`` passes its validated settings.  Per hook call:
check the caller (``hooks.auth``), read the body (411 when chunked, 413 before
reading when it is too large), decode it (``hooks.wire``), reconcile, answer
with an ETag (304 when ``If-None-Match`` matches), then one log line and the
metrics (``hooks.calls``).  Every error is a JSON body with a 4xx/5xx status; an
unexpected exception is logged and answered with 500 while the worker lives on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from datetime import datetime
from typing import Any, Callable, NamedTuple

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from hooks import auth, calls, config, logs, wire
from hooks.memo import Memo
from hooks.metrics import CONTENT_TYPE, Metrics
from hooks.sync import BadRequest, handle
from hooks.timeutil import utc_now

log = logging.getLogger(logs.LOGGER)
call_log = logging.getLogger(logs.CALL_LOGGER)
LEVELS = {calls.OK: logging.INFO, calls.NOT_MODIFIED: logging.INFO, calls.REFUSED: logging.WARNING,
          calls.REJECTED: logging.WARNING, calls.ERROR: logging.ERROR}


def json_response(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype="application/json")


def error(status: int, reason: str, message: str) -> Response:
    return json_response({"error": reason, "message": message}, status)


def http_error(exc: HTTPException) -> Response:
    response = error(exc.code or 500, type(exc).__name__, exc.description or "")
    if exc.code == 405 and exc.valid_methods:
        response.headers["Allow"] = ", ".join(exc.valid_methods)
    return response


def request_body() -> bytes:
    """The request body: Content-Length bytes, read straight from the server's input stream.

    werkzeug's ``request.stream`` reads into a buffer of its own and copies it out again: for a
    22 MB request two more copies of it, and page faults on each, a fifth of the whole sync.
    A WSGI application may read ``wsgi.input`` itself up to Content-Length; the size limit
    (413 before anything is read) is checked here instead."""
    length = request.content_length or 0
    limit = request.max_content_length
    if limit is not None and length > limit:
        raise RequestEntityTooLarge()
    stream = request.environ["wsgi.input"]
    chunks = []
    while length > 0 and (chunk := stream.read(length)):
        chunks.append(chunk)
        length -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def etag_of(data: bytes) -> str:
    """A strong validator: 128 bits of the answer's SHA-256."""
    return '"' + hashlib.sha256(data).hexdigest()[:32] + '"'


def etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    return any(candidate.strip().removeprefix("W/") in (etag, "*") for candidate in header.split(","))


class Answer(NamedTuple):
    response: Response
    outcome: str
    reason: str | None = None
    body: Any = None
    result: dict | None = None


def rejected(status: int, reason: str, message: str, body: Any = None) -> Answer:
    return Answer(error(status, reason, message), calls.REJECTED, reason, body)


def create_app(
    config_overrides: dict[str, Any] | None = None,
    clock: Callable[[], datetime] = utc_now,
    settings: config.Settings | None = None,
) -> Flask:
    """App factory; ``clock`` is injectable so tests can fix time.  Without ``settings`` they
    come from the ``DECICE_HOOKS_*`` environment (ConfigError if invalid)."""
    settings = settings or config.from_sources({}, os.environ)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.config.update(config_overrides or {})
    tokens = auth.TokenFile(settings.auth_token_file) if settings.auth_token_file else None
    policy = settings.policy
    memo = Memo(pods=settings.memo_pods)
    metrics = Metrics()

    def authorize() -> Answer | None:
        """None when the caller may call the hooks."""
        if settings.tls_client_ca_file and not auth.client_certificate(request.environ):
            return rejected(401, "ClientCertificateRequired", "a client certificate signed by the configured CA is required")
        if tokens is None:
            return None
        try:
            accepted = tokens.tokens()
        except auth.TokenError as exc:
            log.error("cannot check bearer tokens: %s", exc)
            return Answer(error(503, "AuthUnavailable", "the hook cannot check credentials; see its log"),
                          calls.ERROR, "AuthUnavailable")
        if not auth.token_accepted(auth.bearer_token(request.headers.get("Authorization")), accepted):
            answer = rejected(401, "Unauthorized", "missing or invalid bearer token")
            answer.response.headers["WWW-Authenticate"] = 'Bearer realm="decice-hooks"'
            return answer
        return None

    def answer(finalizing: bool) -> Answer:
        if (denied := authorize()) is not None:
            return denied
        if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
            # Metacontroller always sends a length; without one the size limit cannot be checked up front.
            return rejected(411, "LengthRequired", "a hook request must carry Content-Length, not a chunked body")
        try:
            data = request_body()
            body = wire.decode(data)
        except orjson.JSONDecodeError as exc:
            return rejected(400, "MalformedJSON", f"request body is not valid JSON: {exc}")
        except HTTPException as exc:
            return Answer(http_error(exc), calls.REJECTED, type(exc).__name__)
        try:
            result = handle(body, clock(), finalizing, policy, memo, source=data)
            data = orjson.dumps(result)
        except BadRequest as exc:
            return rejected(400, "BadRequest", str(exc), body)
        except orjson.JSONEncodeError as exc:
            return rejected(400, "BadRequest", f"the answer to this request cannot be encoded: {exc}", body)
        except Exception:
            log.exception("unexpected error handling %s %s", request.method, request.path)
            return Answer(error(500, "InternalError", "the hook failed unexpectedly; see the hook server's log"),
                          calls.ERROR, "InternalError", body)
        reason = calls.refusal(result)
        outcome = calls.REFUSED if reason else calls.OK
        if not settings.etag:
            return Answer(Response(data, mimetype="application/json"), outcome, reason, body, result)
        etag = etag_of(data)
        if etag_matches(request.headers.get("If-None-Match"), etag):
            response = Response(status=304, headers={"ETag": etag})
            return Answer(response, outcome if reason else calls.NOT_MODIFIED, reason, body, result)
        return Answer(Response(data, mimetype="application/json", headers={"ETag": etag}), outcome, reason, body, result)

    def hook(name: str, finalizing: bool) -> Response:
        started = time.perf_counter()
        request_id = logs.request_id(request.headers.get(logs.REQUEST_ID_HEADER))
        result = answer(finalizing)
        call = calls.Call(
            hook=name,
            request_id=request_id,
            status=result.response.status_code,
            outcome=result.outcome,
            reason=result.reason,
            duration=time.perf_counter() - started,
            parent=calls.parent_of(result.body),
            children=len(result.result["children"]) if result.result else None,
            phase=calls.phase_of(result.result) if result.result else None,
        )
        metrics.record(call)
        call_log.log(LEVELS[call.outcome], "hook call", extra={"fields": call.fields()})
        result.response.headers[logs.REQUEST_ID_HEADER] = request_id
        return result.response

    @app.post("/sync")
    def sync() -> Response:
        return hook("sync", finalizing=False)

    @app.post("/finalize")
    def finalize() -> Response:
        return hook("finalize", finalizing=True)

    @app.get("/healthz")
    def healthz() -> Response:
        return json_response({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        return json_response({"status": "ready"})

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        return Response(metrics.exposition(), mimetype=None, content_type=CONTENT_TYPE)

    @app.errorhandler(HTTPException)
    def on_http_error(exc: HTTPException) -> Response:
        return http_error(exc)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.exception("unexpected error handling %s %s", request.method, request.path)
        return error(500, "InternalError", "the hook failed unexpectedly; see the hook server's log")

    return app
