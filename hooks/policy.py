"""What the operator allows the hooks to generate (issue-independent defaults: the safest).

The hook service loads one ``Policy`` at start-up and passes it to every
reconcile; runtimes read what concerns them (e.g. the tolerations edge nodes
need).  Frozen, so a worker never shares mutable state between requests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    edge_tolerations: tuple[dict, ...] = ()
    allowed_service_accounts: frozenset[str] = frozenset()
    allow_privileged: bool = False


DEFAULT_POLICY = Policy()
