"""The ``kubernetes`` runtime: one Pod per replica, retried like a Job controller would.

Each replica ``i`` of a task is a *slot*; its pods are attempts ``<job>-<task>-<i>``,
``…-<i>-1``, ``…-<i>-2`` … .  The newest attempt decides the slot's state.  A failed
attempt stays (for its logs) and a replacement with the next attempt number is
created once its back-off delay has passed; failures caused by disruptions
(eviction, preemption, node loss) are replaced at once and not counted.
Only the fields of observed pods listed in ``ObservedPod`` are read (``hooks.wire``
decodes no others), and ``PodView`` holds what the hook makes of them.  A task's desired
pods depend only on the job, the task and its slots' attempt numbers, so the hook server
builds them again only when one of those changes (``hooks.memo``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Any, Callable, Iterable, NamedTuple, TypedDict

from hooks import names, podtemplate
from hooks.memo import NO_MEMO, Attempts, Memo
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


class _ObservedMeta(TypedDict, total=False):
    name: Any
    namespace: Any
    labels: Any
    creationTimestamp: Any
    deletionTimestamp: Any


class _ObservedSpec(TypedDict, total=False):
    nodeName: Any


class _ObservedContainer(TypedDict, total=False):
    restartCount: Any
    state: Any


class _ObservedStatus(TypedDict, total=False):
    phase: Any
    reason: Any
    message: Any
    startTime: Any
    conditions: Any
    containerStatuses: list[_ObservedContainer] | None
    initContainerStatuses: list[_ObservedContainer] | None


class ObservedPod(TypedDict, total=False):
    """Every field of an observed Pod that ``pod_view`` (and ``hooks.sync.parse_request``) reads.

    Requests are decoded into this shape (``hooks.wire``), so a field read from a pod must be
    listed here; tests/test_wire.py checks that views of full and decoded pods agree."""

    metadata: _ObservedMeta | None
    spec: _ObservedSpec | None
    status: _ObservedStatus | None


class PodView(NamedTuple):
    """The fields of an observed Pod the hook needs, read defensively.  (A named tuple: one is
    built per observed pod per sync, and that is several times cheaper than a dataclass.)"""

    name: str
    task: str
    index: int
    attempt: int
    phase: str
    ready: bool
    node: str | None
    finished: datetime | None
    restarts: int
    disruption: str | None
    failure: str
    stuck: Stuck | None

    @property
    def active(self) -> bool:
        return self.phase in ACTIVE_PHASES


POD_PHASES = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})


def _conditions(status: dict) -> dict[str, dict]:
    """The pod's conditions by type."""
    by_type = {}
    for cond in as_list(status.get("conditions")):
        if isinstance(cond, dict):
            by_type[cond.get("type")] = cond
    return by_type


def _stuck(name: str, task: str, meta: dict, status: dict, conditions: dict[str, dict]) -> Stuck | None:
    """Why a pod that is not running ready cannot make progress, if it cannot."""
    scheduled = conditions.get("PodScheduled", {})
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        since = parse_time(scheduled.get("lastTransitionTime")) or parse_time(meta.get("creationTimestamp"))
        return Stuck(name, task, "Unschedulable", str(scheduled.get("message", "")), since)
    for cs in as_list(status.get("initContainerStatuses")) + as_list(status.get("containerStatuses")):
        waiting = as_dict(as_dict(as_dict(cs).get("state")).get("waiting"))
        if waiting.get("reason") in STUCK_REASONS:
            since = parse_time(status.get("startTime")) or parse_time(meta.get("creationTimestamp"))
            return Stuck(name, task, str(waiting["reason"]), str(waiting.get("message", "")), since)
    return None


def _termination(status: dict, conditions: dict[str, dict]) -> tuple[datetime | None, str]:
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
        finished = parse_time(conditions.get("Ready", {}).get("lastTransitionTime"))
    return finished, detail


def _disruption(status: dict, conditions: dict[str, dict]) -> str | None:
    if status.get("reason") in DISRUPTION_REASONS:
        return str(status["reason"])
    target = conditions.get("DisruptionTarget", {})
    if target.get("status") == "True":
        return str(target.get("reason") or "DisruptionTarget")
    return None


def _restarts(status: dict) -> int:
    total = 0
    for cs in as_list(status.get("containerStatuses")):
        if isinstance(cs, dict):
            total += as_int(cs.get("restartCount")) or 0
    return total


def pod_view(obj: Any, job: str | None = None) -> PodView | None:
    """An observed Pod as a PodView, or None when it does not carry our slot labels (of ``job``,
    if given).  Runs for every observed pod on every sync, so it reads only what it needs:
    a running, ready pod costs a few lookups."""
    meta = as_dict(as_dict(obj).get("metadata"))
    labels = as_dict(meta.get("labels"))
    if job is not None and labels.get(names.LABEL_JOB) != job:
        return None
    task, index = labels.get(names.LABEL_TASK), as_int(labels.get(names.LABEL_INDEX))
    attempt = as_int(labels.get(names.LABEL_ATTEMPT, 0))
    name = meta.get("name")
    if not isinstance(task, str) or index is None or attempt is None or not isinstance(name, str):
        return None
    status = as_dict(obj.get("status"))
    phase = status.get("phase")
    if phase not in POD_PHASES:
        phase = "Pending"
    if phase in ("Pending", "Running") and meta.get("deletionTimestamp"):
        phase = "Unknown"
    conditions = _conditions(status)
    ready = conditions.get("Ready", {}).get("status") == "True"
    finished, failure, disruption, stuck = None, "failed", None, None
    if phase in ("Succeeded", "Failed"):
        finished, detail = _termination(status, conditions)
        finished = finished or parse_time(meta.get("creationTimestamp"))
        failure = detail or failure
        if phase == "Failed":
            disruption = _disruption(status, conditions)
    elif phase == "Pending" or (phase == "Running" and not ready):
        stuck = _stuck(name, task, meta, status, conditions)
    node = as_dict(obj.get("spec")).get("nodeName")
    return PodView(name, task, index, attempt, phase, ready, node if isinstance(node, str) and node else None,
                   finished, _restarts(status), disruption, failure, stuck)


def observed_pods(children: Children, job: DeciceJob, tasks: Iterable[Task]) -> dict[tuple[str, int], list[PodView]]:
    """Observed pods of ``tasks`` grouped by slot (task, index), oldest attempt first."""
    wanted = {t.name: t.replicas for t in tasks}
    slots: dict[tuple[str, int], list[PodView]] = {}
    for obj in as_dict(children.get(POD)).values():
        view = pod_view(obj, job.name)
        if view is not None and view.index < wanted.get(view.task, 0):
            slots.setdefault((view.task, view.index), []).append(view)
    for pods in slots.values():
        if len(pods) > 1:
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


def replica_pods(job: DeciceJob, task: Task, node_expressions: tuple[dict, ...] = ()) -> Callable[[int, int], dict]:
    """A builder of the task's pods: ``pod(index, attempt)``.

    Everything the replicas share (the template, their labels, the node affinity of each
    scheduled node) is built once; each pod copies only the few dicts that differ, and shares
    the rest read-only.  This runs for every replica on every sync."""
    template = podtemplate.pod_template(job, task)
    spec, metadata = template["spec"], template["metadata"]
    container, labels = spec["containers"][0], metadata["labels"]
    subdomain = names.service_name(job.name)
    affinities = {node: podtemplate.node_affinity(node, node_expressions) for node in set(task.placement.nodes) or {None}}

    def pod(index: int, attempt: int) -> dict[str, Any]:
        replica = str(index)
        pod_spec = dict(spec)
        pod_spec["hostname"] = names.host_name(task.name, index)
        pod_spec["subdomain"] = subdomain
        if affinity := affinities[task.placement.node_for(index)]:
            pod_spec["affinity"] = affinity
        pod_spec["containers"] = [{**container, "env": [{"name": podtemplate.ENV_INDEX, "value": replica}, *container["env"]]}]
        pod_metadata: dict[str, Any] = {
            "name": names.pod_name(job.name, task.name, index, attempt),
            "namespace": job.namespace,
            "labels": {**labels, names.LABEL_INDEX: replica, names.LABEL_ATTEMPT: str(attempt)},
        }
        if "annotations" in metadata:
            pod_metadata["annotations"] = metadata["annotations"]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": pod_spec}

    return pod


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


def task_pods(
    job: DeciceJob, task: Task, attempts: Attempts, node_expressions: tuple[dict, ...] = (),
) -> list[dict[str, Any]]:
    """The pods of ``task``: for each slot, one per attempt number."""
    pod = replica_pods(job, task, node_expressions)
    return [pod(index, attempt) for index, slot in enumerate(attempts) for attempt in slot]


def desired(
    job: DeciceJob, tasks: tuple[Task, ...], children: Children, observation: Observation, plan: Plan, now: datetime,
    policy: Policy, memo: Memo = NO_MEMO, node_expressions: tuple[dict, ...] = (),
) -> list[dict[str, Any]]:
    slots: dict[tuple[str, int], list[PodView]] = observation.detail or {}
    out: list[dict[str, Any]] = []
    for task in tasks:
        attempts = tuple(
            tuple(slot_attempts(task, slots.get((task.name, index), []), plan, now)) for index in range(task.replicas)
        )
        build = partial(task_pods, job, task, attempts, node_expressions)
        out += memo.task_pods(job, task, node_expressions, attempts, build)
    return out
