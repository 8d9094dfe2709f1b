"""A DeciceJob's status as the DECICE framework's task-status update.

``task_statuses`` reads only what the hooks write (docs/semantics.md) and the
DECICE ids ``glue.translate`` put on the job; it never raises on a malformed
status — a task it cannot read about is reported PENDING.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Mapping

from glue import naming
from glue.errors import InvalidJob
from hooks.read import as_dict, as_list, as_str
from hooks.timeutil import parse_time

WAITING, PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "WAITING", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")
TASK_STATES = {"Waiting": WAITING, "Pending": PENDING, "Running": RUNNING, "Succeeded": SUCCEEDED, "Failed": FAILED}
FINISHED_PHASES = ("Succeeded", "Failed")
JOB_LEVEL_STOPS = ("InvalidSpec", "RuntimeUnavailable")
"""Reasons of ``Progressing=False`` that hold every task back, not just one."""


def condition(job: Mapping[str, Any], kind: str) -> dict:
    """The status condition of type ``kind`` ({} when absent)."""
    return next((c for c in as_list(as_dict(job.get("status")).get("conditions"))
                 if isinstance(c, dict) and c.get("type") == kind), {})


def is_finished(job: Mapping[str, Any]) -> bool:
    return as_dict(job.get("status")).get("phase") in FINISHED_PHASES


def ttl_expired(job: Mapping[str, Any], now: datetime) -> bool:
    """A finished job whose ``ttlSecondsAfterFinished`` has passed since ``status.completionTime``
    (and that is not already being deleted)."""
    ttl = as_dict(job.get("spec")).get("ttlSecondsAfterFinished")
    completed = parse_time(as_dict(job.get("status")).get("completionTime"))
    if not is_finished(job) or completed is None or as_dict(job.get("metadata")).get("deletionTimestamp"):
        return False
    return isinstance(ttl, int) and not isinstance(ttl, bool) and now >= completed + timedelta(seconds=ttl)


def _why(cond: dict) -> str:
    reason, message = as_str(cond.get("reason")), as_str(cond.get("message"))
    return f"{reason}: {message}" if reason and message else reason or message


def _waiting_for(task: dict, entries: dict[str, dict]) -> str:
    pending = [d for d in as_list(task.get("dependsOn")) if as_dict(entries.get(d)).get("phase") != "Succeeded"]
    return f"waiting for {', '.join(map(str, pending))}" if pending else "waiting for dependencies"


def _state(task: dict, entry: dict, entries: dict[str, dict], job: Mapping[str, Any]) -> tuple[str, str | None]:
    """One task's framework state and detail."""
    status = as_dict(job.get("status"))
    phase = status.get("phase")
    state = TASK_STATES.get(entry.get("phase"), PENDING)
    message = as_str(entry.get("message"))
    if state in (SUCCEEDED, FAILED):
        return state, message or (_why(condition(job, "Failed")) if state == FAILED else "") or None
    if as_dict(job.get("metadata")).get("deletionTimestamp"):
        return CANCELLED, "the DeciceJob is being deleted"
    if phase == "Failed":
        return CANCELLED, f"the job failed before this task finished: {_why(condition(job, 'Failed'))}"
    if phase == "Suspended":
        return PENDING, "the DeciceJob is suspended"
    progressing = condition(job, "Progressing")
    if progressing.get("status") == "False" and progressing.get("reason") in JOB_LEVEL_STOPS:
        return state, _why(progressing)
    if state == WAITING:
        return state, message or _waiting_for(task, entries)
    return state, message or None


def task_statuses(decicejob: Mapping[str, Any]) -> dict[str, Any]:
    """``{workflow_id, statuses: [{task_id, status, detail}]}`` for a DeciceJob made by
    ``glue.translate``; raises :class:`InvalidJob` for a job without DECICE ids."""
    meta = as_dict(decicejob.get("metadata"))
    workflow_id = as_dict(meta.get("annotations")).get(naming.WORKFLOW_ID) or as_dict(meta.get("labels")).get(
        naming.WORKFLOW_ID)
    errors = [] if workflow_id else [f"metadata.annotations[{naming.WORKFLOW_ID}]: missing (not made by glue.translate)"]
    entries = {e["name"]: e for e in as_list(as_dict(decicejob.get("status")).get("tasks"))
               if isinstance(e, dict) and isinstance(e.get("name"), str)}
    statuses = []
    for i, task in enumerate(as_list(as_dict(decicejob.get("spec")).get("tasks"))):
        task = as_dict(task)
        task_id = as_dict(task.get("annotations")).get(naming.TASK_ID) or as_dict(task.get("labels")).get(naming.TASK_ID)
        if not task_id:
            errors.append(f"spec.tasks[{i}].annotations[{naming.TASK_ID}]: missing (not made by glue.translate)")
            continue
        state, detail = _state(task, as_dict(entries.get(task.get("name"))), entries, decicejob)
        statuses.append({"task_id": task_id, "status": state, "detail": detail})
    if errors:
        raise InvalidJob(errors)
    return {"workflow_id": workflow_id, "statuses": statuses}
