"""Job-level decisions and the DeciceJob status, in one place.

``decide`` turns the task statuses the runtimes observed, the previous status
and the clock into the job's phase and the plan the runtimes apply;
``render`` writes ``status``.  Time enters the status only at transitions
(``startTime``, ``completionTime``, a condition's ``lastTransitionTime``); once
written, those values are read back from the previous status, so the same
observed state always yields the same bytes.  Succeeded and Failed are latched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping

from hooks.model import DeciceJob
from hooks.read import as_list
from hooks.runtimes.base import Observation, Plan, Stuck, TaskStatus
from hooks.timeutil import format_time, parse_time

PENDING, RUNNING, SUCCEEDED, FAILED, SUSPENDED = "Pending", "Running", "Succeeded", "Failed", "Suspended"
WAITING = "Waiting"
FINISHED = (SUCCEEDED, FAILED)
CONDITION_TYPES = ("Complete", "Failed", "Suspended", "Progressing", "InvalidSpec")


@dataclass(frozen=True)
class Decision:
    phase: str
    reason: str
    message: str
    plan: Plan
    start_time: str | None
    completion_time: str | None
    stuck: Stuck | None = None
    wake_at: datetime | None = None


def previous_condition(previous: Mapping[str, Any], kind: str) -> dict:
    conditions = previous.get("conditions")
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return {}


def dependencies_met(job: DeciceJob, task_name: str, tasks: Mapping[str, TaskStatus], skip_runtime: str = "") -> bool:
    """A dependency is met when it succeeded or, for a service task, all its replicas are ready.
    Dependencies on tasks of ``skip_runtime`` are left out (that runtime orders them itself)."""
    for dep in job.spec.task(task_name).depends_on:
        if job.spec.task(dep).runtime == skip_runtime:
            continue
        status = tasks[dep]
        if job.spec.task(dep).is_service:
            if status.ready < status.replicas:
                return False
        elif status.phase != SUCCEEDED:
            return False
    return True


def gate(
    job: DeciceJob, observed: Iterable[TaskStatus], together: frozenset[str] = frozenset()
) -> tuple[tuple[TaskStatus, ...], frozenset[str]]:
    """Tasks that have not started are Waiting until their dependencies are met.

    Returns the task statuses in spec order and the names of the tasks that may start
    (all started tasks, plus the others whose dependencies are met).  Only starting is
    gated: a started task keeps going even if a service it depends on becomes unready.
    The tasks of a runtime in ``together`` become one object (a Volcano Job) that orders
    them itself: they start together, once every dependency on another runtime's task is met."""
    by_name = {t.name: t for t in observed}
    group_ready: dict[str, bool] = {}
    for runtime in together:
        members = [t.name for t in job.spec.tasks if t.runtime == runtime]
        group_ready[runtime] = any(by_name[m].started for m in members) or all(
            dependencies_met(job, m, by_name, skip_runtime=runtime) for m in members
        )
    startable = set()
    ordered = []
    for task in job.spec.tasks:
        status = by_name[task.name]
        if task.runtime in group_ready:
            ready = group_ready[task.runtime]
        else:
            ready = status.started or dependencies_met(job, task.name, by_name)
        if ready:
            startable.add(task.name)
        else:
            status = replace(status, phase=WAITING)
        ordered.append(status)
    return tuple(ordered), frozenset(startable)


def _failure(
    job: DeciceJob, tasks: tuple[TaskStatus, ...], observations: Iterable[Observation], start: datetime | None, now: datetime
) -> tuple[str, str] | None:
    for obs in observations:
        if obs.failure:
            return obs.failure
    counted = sum(t.failed for t in tasks if t.counts_failures)
    if counted > job.spec.backoff_limit:
        return "BackoffLimitExceeded", f"{counted} failed pods exceed backoffLimit {job.spec.backoff_limit}"
    deadline = job.spec.active_deadline_seconds
    if deadline is not None and start is not None and now >= start + timedelta(seconds=deadline):
        return "DeadlineExceeded", f"job was active longer than activeDeadlineSeconds ({deadline}s)"
    return None


def _stuck_failure(job: DeciceJob, stuck: tuple[Stuck, ...], now: datetime) -> tuple[str, str] | None:
    limit = job.spec.pending_deadline_seconds
    if limit is None:
        return None
    for item in stuck:
        if item.since is not None and now >= item.since + timedelta(seconds=limit):
            return item.reason, f"{item.describe()} (stuck longer than pendingDeadlineSeconds {limit}s)"
    return None


def _active_phase(job: DeciceJob, tasks: tuple[TaskStatus, ...]) -> str:
    batch = [t for t in tasks if not job.spec.task(t.name).is_service]
    if batch and all(t.phase == SUCCEEDED for t in batch):
        return SUCCEEDED
    if any(t.phase in (RUNNING, SUCCEEDED) for t in tasks):
        return RUNNING
    return PENDING


def decide(
    job: DeciceJob,
    tasks: tuple[TaskStatus, ...],
    startable: frozenset[str],
    observations: tuple[Observation, ...],
    previous: Mapping[str, Any],
    now: datetime,
) -> Decision:
    """The job's phase (latched once finished), why, and what the runtimes should do."""
    stuck_all = tuple(s for obs in observations for s in obs.stuck)
    prev_phase = previous.get("phase")
    start = parse_time(previous.get("startTime"))
    if prev_phase in FINISHED:
        phase = prev_phase
        cond = previous_condition(previous, "Complete" if phase == SUCCEEDED else "Failed")
        reason, message = cond.get("reason", phase), str(previous.get("message", ""))
    elif job.spec.suspend:
        phase, reason, message = SUSPENDED, "JobSuspended", "job is suspended"
    else:
        start = start or now
        failure = _failure(job, tasks, observations, start, now) or _stuck_failure(job, stuck_all, now)
        phase = FAILED if failure else _active_phase(job, tasks)
        if failure:
            reason, message = failure
        elif phase == SUCCEEDED:
            reason, message = "Completed", "all batch tasks succeeded"
        else:
            reason, message = "TasksProgressing", summary(tasks)

    completion = parse_time(previous.get("completionTime")) if prev_phase in FINISHED else None
    if phase in FINISHED:
        completion = completion or now
    ttl = job.spec.ttl_seconds_after_finished
    expires = completion + timedelta(seconds=ttl) if completion is not None and ttl is not None else None
    expired = expires is not None and now >= expires

    if phase in (PENDING, RUNNING):
        plan = Plan(start=startable, keep_active=True, keep_finished=True)
    else:
        plan = Plan(start=frozenset(), keep_active=False, keep_finished=not expired)

    wake: list[datetime] = []
    if phase in (PENDING, RUNNING):
        if job.spec.active_deadline_seconds is not None and start is not None:
            wake.append(start + timedelta(seconds=job.spec.active_deadline_seconds))
        if job.spec.pending_deadline_seconds is not None:
            wake += [s.since + timedelta(seconds=job.spec.pending_deadline_seconds) for s in stuck_all if s.since]
        wake += [obs.retry_at for obs in observations if obs.retry_at is not None]
    elif expires is not None and not expired:
        wake.append(expires)

    return Decision(
        phase=phase,
        reason=reason,
        message=message,
        plan=plan,
        start_time=format_time(start) if start is not None and phase != SUSPENDED else None,
        completion_time=format_time(completion) if completion is not None else None,
        stuck=stuck_all[0] if stuck_all and phase in (PENDING, RUNNING) else None,
        wake_at=min(wake) if wake else None,
    )


def summary(tasks: Iterable[TaskStatus]) -> str:
    """A one-line human summary such as '1/3 tasks succeeded; running: train; waiting: eval'."""
    tasks = tuple(tasks)
    done = sum(t.phase == SUCCEEDED for t in tasks)
    parts = [f"{done}/{len(tasks)} tasks succeeded"]
    for phase in (RUNNING, PENDING, WAITING, FAILED):
        names = [t.name for t in tasks if t.phase == phase]
        if names:
            parts.append(f"{phase.lower()}: {', '.join(names)}")
    return "; ".join(parts)


def task_entries(
    job: DeciceJob, tasks: tuple[TaskStatus, ...], phase: str, previous: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``status.tasks``.  When the job finishes, tasks that were active share its fate (service
    tasks stopped after success count as succeeded); afterwards each task's phase is latched,
    and its counts too once its children are gone (TTL), so history does not fade."""
    if phase == SUCCEEDED:
        tasks = tuple(replace(t, phase=SUCCEEDED) if job.spec.task(t.name).is_service else t for t in tasks)
    elif phase == FAILED:
        tasks = tuple(replace(t, phase=FAILED) if t.phase in (PENDING, RUNNING) else t for t in tasks)
    if previous.get("phase") not in FINISHED:
        return [t.as_dict() for t in tasks]
    before = {e.get("name"): e for e in as_list(previous.get("tasks")) if isinstance(e, dict)}
    entries = []
    for task in tasks:
        old = before.get(task.name)
        if old is None:
            entries.append(task.as_dict())
        elif not task.started:
            entries.append(old)
        else:
            entries.append({**task.as_dict(), "phase": old.get("phase", task.phase)})
    return entries


def condition(
    kind: str, status: bool, reason: str, message: str, previous: Mapping[str, Any], generation: int, now: datetime
) -> dict[str, Any]:
    """A metav1.Condition whose lastTransitionTime moves only when its status changes."""
    value = "True" if status else "False"
    before = previous_condition(previous, kind)
    since = before.get("lastTransitionTime") if before.get("status") == value else None
    return {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since if isinstance(since, str) and parse_time(since) else format_time(now),
        "observedGeneration": generation,
    }


def conditions(
    decision: Decision, invalid: str | None, previous: Mapping[str, Any], generation: int, now: datetime
) -> list[dict[str, Any]]:
    phase = decision.phase
    if invalid is not None:
        progressing = (False, "InvalidSpec", invalid)
    elif phase in FINISHED:
        progressing = (False, "JobFinished", decision.message)
    elif phase == SUSPENDED:
        progressing = (False, "JobSuspended", decision.message)
    elif decision.stuck is not None:
        progressing = (False, decision.stuck.reason, decision.stuck.describe())
    else:
        progressing = (True, "TasksProgressing", decision.message)
    rows = [
        ("Complete", phase == SUCCEEDED, decision.reason if phase == SUCCEEDED else "NotComplete",
         decision.message if phase == SUCCEEDED else ""),
        ("Failed", phase == FAILED, decision.reason if phase == FAILED else "NotFailed",
         decision.message if phase == FAILED else ""),
        ("Suspended", phase == SUSPENDED, "JobSuspended" if phase == SUSPENDED else "NotSuspended",
         decision.message if phase == SUSPENDED else ""),
        ("Progressing", *progressing),
        ("InvalidSpec", invalid is not None, "InvalidSpec" if invalid is not None else "SpecValid", invalid or ""),
    ]
    return [condition(kind, ok, reason, msg, previous, generation, now) for kind, ok, reason, msg in rows]


def render(
    job: DeciceJob,
    decision: Decision,
    tasks: tuple[TaskStatus, ...],
    volumes: list[dict[str, Any]],
    previous: Mapping[str, Any],
    now: datetime,
) -> dict[str, Any]:
    entries = task_entries(job, tasks, decision.phase, previous)
    done = sum(e.get("phase") == SUCCEEDED for e in entries)
    status: dict[str, Any] = {"observedGeneration": job.generation, "phase": decision.phase}
    if decision.start_time:
        status["startTime"] = decision.start_time
    if decision.completion_time:
        status["completionTime"] = decision.completion_time
    status["progress"] = f"{done}/{len(entries)}"
    status["message"] = decision.stuck.describe() if decision.stuck else decision.message
    status["conditions"] = conditions(decision, None, previous, job.generation, now)
    status["tasks"] = entries
    status["volumes"] = volumes
    return status


def refused(
    previous: Mapping[str, Any], generation: int | None, reason: str, message: str, now: datetime
) -> dict[str, Any]:
    """Status for a job the hook will not act on (invalid spec, runtime not installed): the last
    phase and counts stay as they were, conditions say why."""
    status = {k: v for k, v in previous.items() if k != "conditions"}
    status.setdefault("phase", PENDING)
    if generation is not None:
        status["observedGeneration"] = generation
    status["message"] = message
    kept = [
        c for c in as_list(previous.get("conditions"))
        if isinstance(c, dict) and c.get("type") not in ("Progressing", "InvalidSpec")
    ]
    gen = generation if generation is not None else 0
    invalid = reason == "InvalidSpec"
    status["conditions"] = kept + [
        condition("Progressing", False, reason, message, previous, gen, now),
        condition("InvalidSpec", invalid, "InvalidSpec" if invalid else "SpecValid", message if invalid else "",
                  previous, gen, now),
    ]
    return status
