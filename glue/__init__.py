"""The DECICE framework side: workflows to DeciceJobs and back, and the ``decice`` CLI.

Public names are importable from ``glue`` itself (``from glue import translate``),
but each is imported on first use: importing ``glue`` stays cheap, and only
``DeciceJobClient`` pulls in the Kubernetes client.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "translate": "glue.workflow",
    "split_command": "glue.workflow",
    "task_statuses": "glue.statuses",
    "ttl_expired": "glue.statuses",
    "DeciceJobClient": "glue.client",
    "RetryPolicy": "glue.client",
    "Submission": "glue.client",
    "WatchEvent": "glue.client",
    **{name: "glue.errors" for name in (
        "GlueError", "InvalidInput", "InvalidWorkflow", "UnsupportedWorkflow", "InvalidJob", "ConfigError",
        "ConnectionFailed", "ApiError", "NotFound", "Conflict", "SpecConflict", "Rejected", "WaitTimeout")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'glue' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
