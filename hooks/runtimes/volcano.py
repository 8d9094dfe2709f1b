"""The ``volcano`` runtime: all volcano tasks of a DeciceJob become one Volcano Job.

Volcano (``batch.volcano.sh/v1alpha1``) gang-schedules the Job's pods, restarts the
whole Job on a failed or evicted pod up to ``maxRetry`` times, creates a task's pods
once its ``dependsOn`` tasks run, and gives every pod its host name and peer lists
(``svc`` plugin) and its index (``env`` plugin).  The hook builds the Job from the
spec once: Volcano refuses most changes to an existing Job, so the CompositeController
never updates it (``OnDelete``) and spec edits take effect when it is next created.

The hook never sees Volcano's pods (they belong to the Volcano Job, not to the
DeciceJob); task status comes from the Job's ``status``: its state phase and the
per-task pod counts in ``taskStatusCount``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hooks import names, podtemplate
from hooks.memo import NO_MEMO, Memo
from hooks.model import DeciceJob, Task
from hooks.policy import Policy
from hooks.read import as_dict, as_int, as_list
from hooks.runtimes.base import Children, Observation, Plan, TaskStatus

NAME = "volcano"
API_VERSION = "batch.volcano.sh/v1alpha1"
VOLCANO_JOB = f"Job.{API_VERSION}"
CHILD_KINDS = (VOLCANO_JOB,)
COMPONENT = "manifests/components/volcano"
STARTS_TOGETHER = True

SCHEDULER_NAME = "volcano"
DEFAULT_QUEUE = "default"
INDEX_LABEL = "volcano.sh/task-index"
SVC_PLUGIN_ARGS = ("--publish-not-ready-addresses=true", "--disable-network-policy=true")
JOB_POLICIES = (
    {"event": "PodEvicted", "action": "RestartJob"},
    {"event": "PodFailed", "action": "RestartJob"},
)
ON_FAILURE_POLICIES = ({"event": "TaskFailed", "action": "TerminateJob"},)

FAILED_PHASES = frozenset({"Failed", "Terminated", "Aborted"})
FINISHED_PHASES = FAILED_PHASES | {"Completed"}
QUIET_PHASES = frozenset({"", "Pending", "Running", "Completed"})
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
NEVER_SECONDS = 2**31 - 1


@dataclass(frozen=True)
class VolcanoJobView:
    """The fields of the observed Volcano Job the hook needs, read defensively.
    ``phase`` is empty until Volcano has written a status; ``tasks`` are the task names
    in its spec; ``pods`` maps a task to its pod counts by pod phase (``taskStatusCount``)."""

    name: str
    phase: str
    reason: str
    message: str
    retries: int
    max_retry: int | None
    tasks: frozenset[str] = frozenset()
    pods: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED_PHASES

    def describe(self) -> str:
        text = f"Volcano Job {self.name} {self.phase or 'created'}"
        if self.reason:
            text += f" ({self.reason})"
        if self.message:
            text += f": {self.message}"
        if self.retries:
            text += f"; restarted {self.retries} time{'s' if self.retries != 1 else ''}"
        return text


def volcano_job_view(children: Children, job: DeciceJob) -> VolcanoJobView | None:
    """The observed Volcano Job of ``job``, or None when there is none."""
    name = names.volcano_job_name(job.name)
    obj = as_dict(as_dict(children.get(VOLCANO_JOB)).get(name))
    if not obj:
        return None
    status = as_dict(obj.get("status"))
    state = as_dict(status.get("state"))
    spec = as_dict(obj.get("spec"))
    pods: dict[str, dict[str, int]] = {}
    for task, entry in as_dict(status.get("taskStatusCount")).items():
        phases = as_dict(as_dict(entry).get("phase"))
        pods[str(task)] = {phase: as_int(phases.get(phase)) or 0 for phase in POD_PHASES}
    return VolcanoJobView(
        name=name,
        phase=str(state.get("phase") or ""),
        reason=str(state.get("reason") or ""),
        message=str(state.get("message") or ""),
        retries=max(as_int(status.get("retryCount")) or 0, 0),
        max_retry=as_int(spec.get("maxRetry")),
        tasks=frozenset(str(as_dict(t).get("name")) for t in as_list(spec.get("tasks"))),
        pods=pods,
    )


def internal_dependencies(task: Task, volcano_tasks: tuple[Task, ...]) -> list[str]:
    """The dependencies Volcano orders itself: those on tasks of the same Volcano Job."""
    members = {t.name for t in volcano_tasks}
    return [dep for dep in task.depends_on if dep in members]


def _task_status(task: Task, tasks: tuple[Task, ...], view: VolcanoJobView | None) -> TaskStatus:
    """A task's counts and phase from the Volcano Job's ``taskStatusCount`` (Volcano reports no
    readiness: running pods count as ready).  A task without pods that depends on another task of
    the Job is Waiting: Volcano creates its pods once those run."""
    counts = view.pods.get(task.name, {}) if view is not None else {}
    pending, succeeded, failed = counts.get("Pending", 0), counts.get("Succeeded", 0), counts.get("Failed", 0)
    running = counts.get("Running", 0) + counts.get("Unknown", 0)
    waiting_for = [] if any(counts.values()) else internal_dependencies(task, tasks)
    finished = view is not None and view.finished
    if view is not None and (view.phase == "Completed" or (succeeded >= task.replicas and not task.is_service)):
        phase = "Succeeded"
    elif running or succeeded:
        phase = "Running"
    elif waiting_for and not finished:
        phase = "Waiting"
    else:
        phase = "Pending"
    if view is not None and view.tasks and task.name not in view.tasks:
        message = (f"not in Volcano Job {view.name}, created before the task was added: "
                   "suspend and resume the job to recreate it")
    elif view is not None and (view.phase not in QUIET_PHASES or view.retries):
        message = view.describe()
    elif phase == "Waiting":
        by_name = {t.name: t for t in tasks}
        awaited = [f"{d} {'runs ready' if by_name[d].is_service else 'succeeded'}" for d in waiting_for]
        message = f"Volcano starts it once {', '.join(awaited)}"
    else:
        message = ""
    return TaskStatus(
        name=task.name,
        runtime=NAME,
        phase=phase,
        replicas=task.replicas,
        pending=pending,
        running=running,
        ready=running,
        succeeded=succeeded,
        failed=failed,
        message=message,
        started=view is not None,
        counts_failures=False,
    )


def _failure(view: VolcanoJobView | None) -> tuple[str, str] | None:
    """A Volcano Job that gave up fails the DeciceJob; retries exhausted read as BackoffLimitExceeded."""
    if view is None or view.phase not in FAILED_PHASES:
        return None
    if view.phase == "Failed" and view.max_retry is not None and view.retries >= view.max_retry:
        return "BackoffLimitExceeded", view.describe()
    return f"VolcanoJob{view.phase}", view.describe()


def observe(job: DeciceJob, tasks: tuple[Task, ...], children: Children, now: datetime) -> Observation:
    view = volcano_job_view(children, job)
    return Observation(
        tasks=tuple(_task_status(task, tasks, view) for task in tasks),
        failure=_failure(view),
        workloads=0 if view is None else 1,
        detail=view,
    )


def min_available(job: DeciceJob, tasks: tuple[Task, ...]) -> int:
    """The gang: ``spec.minAvailable`` (default: every volcano replica), at most the replicas of
    the tasks that start first.  Volcano creates a task's pods only once the tasks it depends on
    run, so a larger gang could never be complete and the Job would never be scheduled."""
    first = sum(t.replicas for t in tasks if not internal_dependencies(t, tasks))
    return min(job.spec.min_available or sum(t.replicas for t in tasks), first)


def shared_volumes(job: DeciceJob, tasks: tuple[Task, ...]) -> dict[str, str]:
    """Job volumes Volcano mounts itself (``spec.volumes[].volumeClaimName``), by name, with their
    mount path.  Volcano mounts such a volume into every container of every task at one path, so
    only volumes every volcano task mounts once, whole, read-write and at the same path qualify;
    the others are mounted through each task's pod template."""
    shared = {}
    for volume in job.spec.volumes:
        mounts = [m for t in tasks for m in t.volume_mounts if m.volume == volume.name]
        per_task = [sum(m.volume == volume.name for m in t.volume_mounts) for t in tasks]
        if (
            per_task.count(1) == len(tasks)
            and len({m.mount_path for m in mounts}) == 1
            and not any(m.sub_path or m.read_only for m in mounts)
        ):
            shared[volume.name] = mounts[0].mount_path
    return shared


def _without_volumes(spec: dict[str, Any], volumes: set[str]) -> None:
    """Drop the pod volumes (and their mounts) Volcano adds itself from a template spec copy."""
    kept = [v for v in spec.get("volumes", []) if v["name"] not in volumes]
    if kept:
        spec["volumes"] = kept
    else:
        spec.pop("volumes", None)
    container = dict(spec["containers"][0])
    mounts = [m for m in container.get("volumeMounts", []) if m["name"] not in volumes]
    if mounts:
        container["volumeMounts"] = mounts
    else:
        container.pop("volumeMounts", None)
    spec["containers"] = [container]


def placement(job: DeciceJob, task: Task) -> dict[str, Any]:
    """Pod placement for a shared task template.  Per-replica pinning cannot be expressed in one
    template, so the replicas are confined to the scheduler's nodes; when each node is named once,
    a host spread of at most one makes the per-node counts those of ``nodes[i % len]`` (which
    replica lands on which node is Volcano's choice)."""
    nodes = list(dict.fromkeys(task.placement.nodes))
    if not nodes:
        return {}
    out: dict[str, Any] = {
        "affinity": podtemplate.node_affinity(
            None, ({"key": podtemplate.HOSTNAME_LABEL, "operator": "In", "values": nodes},)
        )
    }
    if len(nodes) > 1 and len(nodes) == len(task.placement.nodes):
        out["topologySpreadConstraints"] = [{
            "maxSkew": 1,
            "topologyKey": podtemplate.HOSTNAME_LABEL,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {names.LABEL_JOB: job.name, names.LABEL_TASK: task.name}},
        }]
    return out


def task_template(job: DeciceJob, task: Task, shared: dict[str, str]) -> dict[str, Any]:
    """The task's pod template: the shared builder's, with the replica index read from the label
    Volcano puts on each pod, Volcano's scheduler, and the node set instead of per-replica pins."""
    index = {"name": podtemplate.ENV_INDEX, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{INDEX_LABEL}']"}}}
    template = podtemplate.pod_template(job, task, [index] + podtemplate.job_env(job, task))
    spec = dict(template["spec"])
    spec.pop("schedulerName", None)
    _without_volumes(spec, set(shared))
    spec.update(placement(job, task))
    return {"metadata": template["metadata"], "spec": spec}


def never_ready(template: dict[str, Any]) -> dict[str, Any]:
    """The template with a readiness probe that never runs, so its container never reports ready.
    Volcano starts a dependent task once every pod of its dependencies is ready or has succeeded;
    for a batch dependency only the latter may count (dependencies must succeed)."""
    spec = dict(template["spec"])
    container = dict(spec["containers"][0])
    container["readinessProbe"] = {"exec": {"command": ["false"]}, "initialDelaySeconds": NEVER_SECONDS}
    spec["containers"] = [container]
    return {"metadata": template["metadata"], "spec": spec}


def volcano_task(job: DeciceJob, task: Task, tasks: tuple[Task, ...], shared: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": task.name, "replicas": task.replicas, "minAvailable": task.replicas}
    if deps := internal_dependencies(task, tasks):
        out["dependsOn"] = {"name": deps}
    if task.restart_policy == "OnFailure":
        # Container restarts in place: Volcano's TaskFailed fires once they reach maxRetry.
        out["maxRetry"] = job.spec.backoff_limit + 1
        out["policies"] = [dict(p) for p in ON_FAILURE_POLICIES]
    template = task_template(job, task, shared)
    awaited = any(task.name in internal_dependencies(t, tasks) for t in tasks)
    out["template"] = never_ready(template) if awaited and not task.is_service else template
    return out


def volcano_job(job: DeciceJob, tasks: tuple[Task, ...]) -> dict[str, Any]:
    """The Volcano Job of the job's volcano tasks, built from the spec alone."""
    shared = shared_volumes(job, tasks)
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "queue": job.spec.queue or DEFAULT_QUEUE,
        "minAvailable": min_available(job, tasks),
        # backoffLimit failures are tolerated: the next one exhausts Volcano's restarts.
        "maxRetry": job.spec.backoff_limit + 1,
        "policies": [dict(p) for p in JOB_POLICIES],
        "plugins": {"env": [], "svc": list(SVC_PLUGIN_ARGS)},
    }
    if job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
    if shared:
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in podtemplate.pod_volumes(job, tasks[0])}
        spec["volumes"] = [{"mountPath": path, "volumeClaimName": claims[name]} for name, path in shared.items()]
    spec["tasks"] = [volcano_task(job, task, tasks, shared) for task in tasks]
    return {
        "apiVersion": API_VERSION,
        "kind": "Job",
        "metadata": {
            "name": names.volcano_job_name(job.name),
            "namespace": job.namespace,
            "labels": names.job_labels(job.name),
        },
        "spec": spec,
    }


def desired(
    job: DeciceJob, tasks: tuple[Task, ...], children: Children, observation: Observation, plan: Plan, now: datetime,
    policy: Policy, memo: Memo = NO_MEMO,
) -> list[dict[str, Any]]:
    """The Volcano Job is created once every volcano task may start (its tasks start together,
    see ``status.gate``), kept while it runs and the plan keeps active children, and kept once
    finished while the plan keeps finished ones."""
    view: VolcanoJobView | None = observation.detail
    if view is None:
        wanted = all(task.name in plan.start for task in tasks)
    else:
        wanted = plan.keep_finished if view.finished else plan.keep_active
    return [volcano_job(job, tasks)] if wanted else []
