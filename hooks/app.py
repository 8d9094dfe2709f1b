"""The Flask layer: HTTP in, ``hooks.sync.handle`` in the middle, JSON out.

``gunicorn 'hooks.app:create_app()'`` serves it.  Every error is a JSON body
with a 4xx/5xx status; an unexpected exception is logged and answered with
500 while the worker lives on.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from hooks.sync import BadRequest, handle
from hooks.timeutil import utc_now

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

log = logging.getLogger("hooks")


def json_response(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype="application/json")


def error(status: int, reason: str, message: str) -> Response:
    return json_response({"error": reason, "message": message}, status)


def create_app(config: dict[str, Any] | None = None, clock: Callable[[], datetime] = utc_now) -> Flask:
    """App factory; ``clock`` is injectable so tests can fix time."""
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = DEFAULT_MAX_BODY_BYTES
    app.config.update(config or {})

    def hook(finalizing: bool) -> Response:
        try:
            body = orjson.loads(request.get_data(cache=False))
        except orjson.JSONDecodeError as exc:
            return error(400, "MalformedJSON", f"request body is not valid JSON: {exc}")
        try:
            return json_response(handle(body, clock(), finalizing))
        except BadRequest as exc:
            return error(400, "BadRequest", str(exc))

    @app.post("/sync")
    def sync() -> Response:
        return hook(finalizing=False)

    @app.post("/finalize")
    def finalize() -> Response:
        return hook(finalizing=True)

    @app.get("/healthz")
    def healthz() -> Response:
        return json_response({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        return json_response({"status": "ready"})

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        response = error(exc.code or 500, type(exc).__name__, exc.description or "")
        if exc.code == 405 and exc.valid_methods:
            response.headers["Allow"] = ", ".join(exc.valid_methods)
        return response

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.exception("unexpected error handling %s %s", request.method, request.path)
        return error(500, "InternalError", "the hook failed unexpectedly; see the hook server's log")

    return app
