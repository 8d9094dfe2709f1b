"""The ``kubernetes`` runtime: one Pod per replica, retried like a Job controller would.

Each replica ``i`` of a task is a *slot*; its pods are attempts ``<job>-<task>-<i>``,
``…-<i>-1``, ``…-<i>-2`` … .  The newest attempt decides the slot's state.  A failed
attempt stays (for its logs) and a replacement with the next attempt number is
created once its back-off delay has passed; failures caused by disruptions
(eviction, preemption, node loss) are replaced at once and not counted.
Only the fields of observed pods listed in ``PodView`` are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping

from hooks import names, podtemplate
from hooks.model import DeciceJob, Task
from hooks.policy import Policy
from hooks.read import as_dict, as_int, as_list
from hooks.runtimes.base import Children, Observation, Plan, Stuck, TaskStatus
from hooks.timeutil import parse_time

NAME = "kubernetes"
POD = "Pod.v1"
CHILD_KINDS = (POD,)

ACTIVE_PHASES = ("Pending", "Running", "Unknown")
DISRUPTION_REASONS = frozenset({"Evicted", "Preempting", "NodeLost", "NodeShutdown", "DeletionByTaintManager"})
STUCK_REASONS = frozenset(
    {"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull",
     "CreateContainerConfigError", "CreateContainerError"}
)
BACKOFF_BASE_SECONDS = 10
BACKOFF_MAX_SECONDS = 360








@dataclass(frozen=True)
class PodView:
    """The fields of an observed Pod the hook needs, read defensively."""

    name: str
    task: str
    index: int
    attempt: int
    phase: str
    ready: bool
    node: str | None
    created: datetime | None
    finished: datetime | None
    restarts: int
    disruption: str | None
    failure: str
    stuck: Stuck | None

    @property
    def active(self) -> bool:
        return self.phase in ACTIVE_PHASES


def _condition(status: dict, kind: str) -> dict:
    return next((c for c in as_list(status.get("conditions")) if isinstance(c, dict) and c.get("type") == kind), {})


def _stuck(name: str, task: str, meta: dict, status: dict, phase: str) -> Stuck | None:
    """Why an active pod cannot make progress, if it cannot."""
    if phase not in ("Pending", "Running"):
        return None
    scheduled = _condition(status, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        since = parse_time(scheduled.get("lastTransitionTime")) or parse_time(meta.get("creationTimestamp"))
        return Stuck(name, task, "Unschedulable", str(scheduled.get("message", "")), since)
    for cs in as_list(status.get("initContainerStatuses")) + as_list(status.get("containerStatuses")):
        waiting = as_dict(as_dict(as_dict(cs).get("state")).get("waiting"))
        if waiting.get("reason") in STUCK_REASONS:
            since = parse_time(status.get("startTime")) or parse_time(meta.get("creationTimestamp"))
            return Stuck(name, task, str(waiting["reason"]), str(waiting.get("message", "")), since)
    return None


def _termination(status: dict) -> tuple[datetime | None, str]:
    """When a terminated pod finished, and a short failure description."""
    finished: datetime | None = None
    detail = ""
    for cs in as_list(status.get("containerStatuses")):
        term = as_dict(as_dict(as_dict(cs).get("state")).get("terminated"))
        if not term:
            continue
        at = parse_time(term.get("finishedAt"))
        if at is not None and (finished is None or at > finished):
            finished = at
        if not detail and term.get("exitCode") not in (0, None):
            detail = f"exit code {term.get('exitCode')}"
            if term.get("reason"):
                detail += f" ({term['reason']})"
            if term.get("message"):
                detail += f": {str(term['message']).strip()}"
    if status.get("reason"):
        detail = f"{status['reason']}: {status.get('message', '')}".rstrip(": ")
    if finished is None:
        finished = parse_time(_condition(status, "Ready").get("lastTransitionTime"))
    return finished, detail


def pod_view(obj: Any) -> PodView | None:
    """An observed Pod as a PodView, or None when it does not carry our slot labels."""
    meta = as_dict(as_dict(obj).get("metadata"))
    labels = as_dict(meta.get("labels"))
    task, index = labels.get(names.LABEL_TASK), as_int(labels.get(names.LABEL_INDEX))
    attempt = as_int(labels.get(names.LABEL_ATTEMPT, 0))
    name = meta.get("name")
    if not isinstance(task, str) or index is None or attempt is None or not isinstance(name, str):
        return None
    status = as_dict(obj.get("status"))
    phase = status.get("phase") if status.get("phase") in ("Pending", "Running", "Succeeded", "Failed", "Unknown") else "Pending"
    if meta.get("deletionTimestamp") and phase in ("Pending", "Running"):
        phase = "Unknown"
    disruption = None
    finished, failure = None, ""
    if phase in ("Succeeded", "Failed"):
        finished, failure = _termination(status)
    if phase == "Failed":
        if status.get("reason") in DISRUPTION_REASONS:
            disruption = str(status["reason"])
        elif _condition(status, "DisruptionTarget").get("status") == "True":
            disruption = str(_condition(status, "DisruptionTarget").get("reason") or "DisruptionTarget")
    restarts = sum(as_int(as_dict(cs).get("restartCount")) or 0 for cs in as_list(status.get("containerStatuses")))
    return PodView(
        name=name,
        task=task,
        index=index,
        attempt=attempt,
        phase=phase,
        ready=_condition(status, "Ready").get("status") == "True",
        node=as_dict(obj.get("spec")).get("nodeName") or None,
        created=parse_time(meta.get("creationTimestamp")),
        finished=finished or parse_time(meta.get("creationTimestamp")),
        restarts=restarts,
        disruption=disruption,
        failure=failure or "failed",
        stuck=_stuck(name, task, meta, status, phase),
    )


def observed_pods(children: Children, job: DeciceJob, tasks: Iterable[Task]) -> dict[tuple[str, int], list[PodView]]:
    """Observed pods of ``tasks`` grouped by slot (task, index), oldest attempt first."""
    wanted = {t.name: t.replicas for t in tasks}
    slots: dict[tuple[str, int], list[PodView]] = {}
    for obj in as_dict(children.get(POD)).values():
        view = pod_view(obj)
        if view is None or wanted.get(view.task, 0) <= view.index:
            continue
        if as_dict(as_dict(obj.get("metadata")).get("labels")).get(names.LABEL_JOB) != job.name:
            continue
        slots.setdefault((view.task, view.index), []).append(view)
    for pods in slots.values():
        pods.sort(key=lambda p: p.attempt)
    return slots


def counted(task: Task, pod: PodView) -> int:
    """Failures this pod counts against backoffLimit: a non-disruption failure, plus container
    restarts for OnFailure tasks (the kubelet retries those in place)."""
    failures = 1 if pod.phase == "Failed" and pod.disruption is None else 0
    return failures + (pod.restarts if task.restart_policy == "OnFailure" else 0)


def retry_delay(failures: int) -> timedelta:
    """Exponential back-off before replacing a slot's n-th counted failure: 10 s, 20 s, … 6 min."""
    return timedelta(seconds=min(BACKOFF_BASE_SECONDS * 2 ** max(failures - 1, 0), BACKOFF_MAX_SECONDS))


def needs_replacement(task: Task, latest: PodView) -> bool:
    """The slot's newest pod has ended without completing its work."""
    return latest.phase == "Failed" or (task.is_service and latest.phase == "Succeeded")


def replacement_due(task: Task, pods: list[PodView]) -> datetime | None:
    """When the slot's replacement pod may be created (None: it needs none)."""
    latest = pods[-1]
    if not needs_replacement(task, latest):
        return None
    if latest.disruption is not None or latest.phase == "Succeeded":
        return latest.finished
    slot_failures = sum(1 for p in pods if p.phase == "Failed" and p.disruption is None)
    if latest.finished is None:
        return None
    return latest.finished + retry_delay(slot_failures)


def _task_status(task: Task, slots: dict[tuple[str, int], list[PodView]]) -> tuple[TaskStatus, list[Stuck], list[datetime]]:
    pending = running = ready = succeeded = failed = disruptions = 0
    nodes: set[str] = set()
    stuck: list[Stuck] = []
    due: list[datetime] = []
    last_failure: PodView | None = None
    started = False
    for index in range(task.replicas):
        pods = slots.get((task.name, index))
        if not pods:
            continue
        started = True
        for pod in pods:
            failed += counted(task, pod)
            if pod.phase == "Failed":
                if pod.disruption is not None:
                    disruptions += 1
                elif last_failure is None or (pod.finished or datetime.min) >= (last_failure.finished or datetime.min):
                    last_failure = pod
            if pod.node and pod.active:
                nodes.add(pod.node)
        latest = pods[-1]
        if latest.phase == "Pending":
            pending += 1
        elif latest.phase in ("Running", "Unknown"):
            running += 1
            ready += latest.ready
        elif latest.phase == "Succeeded" and not task.is_service:
            succeeded += 1
            if latest.node:
                nodes.add(latest.node)
        if latest.stuck is not None:
            stuck.append(latest.stuck)
        if (at := replacement_due(task, pods)) is not None:
            due.append(at)
    if succeeded == task.replicas:
        phase = "Succeeded"
    elif running or succeeded:
        phase = "Running"
    else:
        phase = "Pending"
    if stuck:
        message = stuck[0].describe()
    elif last_failure is not None:
        message = f"{last_failure.name}: {last_failure.failure}"
    else:
        message = ""
    status = TaskStatus(
        name=task.name,
        runtime=task.runtime,
        phase=phase,
        replicas=task.replicas,
        pending=pending,
        running=running,
        ready=ready,
        succeeded=succeeded,
        failed=failed,
        disruptions=disruptions,
        nodes=tuple(sorted(nodes)),
        message=message,
        started=started,
    )
    return status, stuck, due


def observe(job: DeciceJob, tasks: tuple[Task, ...], children: Children, now: datetime) -> Observation:
    slots = observed_pods(children, job, tasks)
    statuses, stuck, due = [], [], []
    for task in tasks:
        status, task_stuck, task_due = _task_status(task, slots)
        statuses.append(status)
        stuck += task_stuck
        due += task_due
    future = [at for at in due if at > now]
    return Observation(
        tasks=tuple(statuses),
        stuck=tuple(stuck),
        retry_at=min(future) if future else None,
        workloads=sum(len(p) for p in slots.values()),
        detail=slots,
    )


def replica_pod(job: DeciceJob, task: Task, template: Mapping[str, Any], index: int, attempt: int,
                node_expressions: tuple[dict, ...] = ()) -> dict[str, Any]:
    """The Pod of replica ``index``, attempt ``attempt``, from the task's shared template."""
    spec = dict(template["spec"])
    spec["hostname"] = names.host_name(task.name, index)
    spec["subdomain"] = names.service_name(job.name)
    if affinity := podtemplate.node_affinity(task.placement.node_for(index), node_expressions):
        spec["affinity"] = affinity
    container = dict(spec["containers"][0])
    container["env"] = [{"name": podtemplate.ENV_INDEX, "value": str(index)}] + container["env"]
    spec["containers"] = [container]
    metadata: dict[str, Any] = {
        "name": names.pod_name(job.name, task.name, index, attempt),
        "namespace": job.namespace,
        "labels": {**template["metadata"]["labels"], names.LABEL_INDEX: str(index), names.LABEL_ATTEMPT: str(attempt)},
    }
    if "annotations" in template["metadata"]:
        metadata["annotations"] = template["metadata"]["annotations"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def slot_attempts(task: Task, pods: list[PodView], plan: Plan, now: datetime) -> list[int]:
    """Attempt numbers of the pods a slot should have: observed ones still wanted, plus the
    next attempt when one is due."""
    keep = [p.attempt for p in pods if (plan.keep_active and p.active) or (plan.keep_finished and not p.active)]
    if task.name not in plan.start:
        return keep
    if not pods:
        return keep + [0]
    due = replacement_due(task, pods)
    if due is not None and due <= now:
        keep.append(pods[-1].attempt + 1)
    return keep


def desired(
    job: DeciceJob, tasks: tuple[Task, ...], children: Children, observation: Observation, plan: Plan, now: datetime,
    policy: Policy, node_expressions: tuple[dict, ...] = (),
) -> list[dict[str, Any]]:
    slots: dict[tuple[str, int], list[PodView]] = observation.detail or {}
    out: list[dict[str, Any]] = []
    for task in tasks:
        template = podtemplate.pod_template(job, task)
        for index in range(task.replicas):
            for attempt in slot_attempts(task, slots.get((task.name, index), []), plan, now):
                out.append(replica_pod(job, task, template, index, attempt, node_expressions))
    return out
