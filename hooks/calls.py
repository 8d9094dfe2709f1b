"""What one hook call did, in a few fields the log line and the metrics both report.

Derived cheaply: the parent's identity from its metadata, the outcome from the
HTTP status and, for an answered call, from the ``Progressing`` condition the
answer carries.  Nothing here looks at children beyond counting them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_FIELD = 253
# The reasons with which a reconcile refuses to act (hooks.sync.refuse), keeping every child.
REFUSALS = frozenset({"InvalidSpec", "RuntimeUnavailable", "PolicyViolation"})
PHASES = frozenset({"Pending", "Running", "Succeeded", "Failed", "Suspended"})

OK, NOT_MODIFIED, REFUSED, REJECTED, ERROR = "ok", "not_modified", "refused", "rejected", "error"


@dataclass(frozen=True)
class Parent:
    namespace: str | None
    name: str | None
    uid: str | None
    generation: int | None
    phase: str | None


@dataclass(frozen=True)
class Call:
    hook: str
    request_id: str
    status: int
    outcome: str
    reason: str | None
    duration: float
    parent: Parent | None = None
    children: int | None = None
    phase: str | None = None

    def fields(self) -> dict[str, Any]:
        """The log line's fields, in a fixed order; absent facts are left out."""
        out: dict[str, Any] = {"hook": self.hook, "requestId": self.request_id}
        if self.parent is not None:
            for key in ("namespace", "name", "uid", "generation"):
                if (value := getattr(self.parent, key)) is not None:
                    out[key] = value
        out["status"] = self.status
        out["outcome"] = self.outcome
        if self.reason is not None:
            out["reason"] = self.reason
        if self.children is not None:
            out["children"] = self.children
        if self.phase is not None:
            out["phase"] = self.phase
        out["durationMs"] = round(self.duration * 1000, 3)
        return out


def _text(value: Any) -> str | None:
    return value[:MAX_FIELD] if isinstance(value, str) else None


def parent_of(body: Any) -> Parent | None:
    """The parent's identity and last reported phase, read defensively from any decoded body."""
    parent = body.get("parent") if isinstance(body, dict) else None
    meta = parent.get("metadata") if isinstance(parent, dict) else None
    if not isinstance(meta, dict):
        return None
    generation = meta.get("generation")
    status = parent.get("status")
    return Parent(
        namespace=_text(meta.get("namespace")),
        name=_text(meta.get("name")),
        uid=_text(meta.get("uid")),
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else None,
        phase=_text(status.get("phase")) if isinstance(status, dict) else None,
    )


def refusal(response: dict) -> str | None:
    """The reason the answer refuses to act, if it does."""
    status = response.get("status")
    for cond in status.get("conditions", ()) if isinstance(status, dict) else ():
        if cond.get("type") == "Progressing":
            reason = cond.get("reason")
            return reason if cond.get("status") == "False" and reason in REFUSALS else None
    return None


def phase_of(response: dict) -> str | None:
    status = response.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return phase if phase in PHASES else None
