"""What the operator allows the hooks to generate (defaults: the safest).

The hook service loads one ``Policy`` at start-up (``hooks.config``) and passes
it to every reconcile; runtimes read what concerns them (e.g. the tolerations
edge nodes need) and ``hooks.guard`` checks every desired child against it.
Frozen, so a worker never shares mutable state between requests.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SERVICE_ACCOUNT = "default"
ANY = "*"


@dataclass(frozen=True)
class Policy:
    """``allowed_service_accounts`` holds ``name`` (in any namespace), ``namespace/name``, or
    ``*`` (any); ``allow_privileged`` allows everything the Pod Security Standards' baseline
    forbids that the guard checks: privileged containers, added capabilities, host
    namespaces, host ports and hostPath volumes."""

    edge_tolerations: tuple[dict, ...] = ()
    allowed_service_accounts: frozenset[str] = frozenset()
    allow_privileged: bool = False

    def allows_service_account(self, namespace: str, name: str) -> bool:
        """The namespace's default account is always allowed; others only when listed."""
        allowed = self.allowed_service_accounts
        return name == DEFAULT_SERVICE_ACCOUNT or ANY in allowed or name in allowed or f"{namespace}/{name}" in allowed


DEFAULT_POLICY = Policy()
