"""The glue's exception types.

Everything the glue raises on purpose derives from :class:`GlueError`.  Input
problems (a workflow the DeciceJob cannot express, an invalid DeciceJob)
carry one ``"field: message"`` line per problem in ``errors``; API problems
carry the HTTP status and the API server's own message.  Importing this
module is cheap (no Kubernetes client).
"""

from __future__ import annotations


class GlueError(Exception):
    """Base of every error the glue raises on purpose."""


class InvalidInput(GlueError, ValueError):
    """Input that cannot be used; ``errors`` lists every problem, one ``"field: message"`` each."""

    def __init__(self, errors: list[str], what: str = "invalid input"):
        self.errors = list(errors)
        super().__init__(f"{what}: {'; '.join(self.errors)}")


class InvalidWorkflow(InvalidInput):
    """A DECICE workflow or schedule that does not validate."""

    def __init__(self, errors: list[str]):
        super().__init__(errors, "invalid workflow")


class UnsupportedWorkflow(InvalidWorkflow):
    """A valid DECICE workflow asking for something a DeciceJob cannot express
    (e.g. a ``k8s_resource`` task)."""


class InvalidJob(InvalidInput):
    """A DeciceJob that does not validate against the spec model, or one the glue cannot
    map back to a workflow (no DECICE ids)."""

    def __init__(self, errors: list[str]):
        super().__init__(errors, "invalid DeciceJob")


class ConfigError(GlueError):
    """No usable cluster configuration (kubeconfig or in-cluster)."""


class ConnectionFailed(GlueError):
    """The API server could not be reached, even after retries."""


class ApiError(GlueError):
    """The API server answered with an error; ``message`` is the API's own message."""

    def __init__(self, status: int, reason: str, message: str):
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"{message} ({status} {reason})" if reason else f"{message} ({status})")


class NotFound(ApiError):
    """404: the DeciceJob does not exist (or was deleted while waiting for it)."""


class Conflict(ApiError):
    """409: the object exists already, or changed under us."""


class SpecConflict(Conflict):
    """``submit``: a DeciceJob with this name exists with a different spec."""


class Rejected(ApiError):
    """400 / 422: the API server refused the object (schema, CEL rules)."""


class WaitTimeout(GlueError, TimeoutError):
    """``wait`` gave up; ``job`` is the last state seen."""

    def __init__(self, message: str, job: dict | None = None):
        super().__init__(message)
        self.job = job
