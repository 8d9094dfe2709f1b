"""The ``sedna`` runtime: the whole DeciceJob becomes one Sedna collaborative-AI resource.

``spec.sedna.kind`` picks the resource (``sedna.io/v1alpha1``): a JointInferenceService, a
FederatedLearningJob, an IncrementalLearningJob or a LifelongLearningJob, named like the job.
Each task fills the worker slot its ``role`` names, with a pod template from the shared
builder.  Sedna's controllers create and watch the worker pods themselves, so the hook sees
only the Sedna resource: task status is read from its ``status`` (phase, conditions and, for
the learning kinds, the stage of the newest condition).  docs/sedna.md has the mapping tables.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator

from hooks import names, podtemplate
from hooks.memo import NO_MEMO, Memo
from hooks.model import (
    SEDNA_KINDS, DeciceJob, HardExampleMining, Sedna, Task, Transmitter, Trigger,
)
from hooks.policy import Policy
from hooks.read import as_dict, as_list, as_str
from hooks.runtimes.base import Children, Observation, Plan, TaskStatus

NAME = "sedna"
API_VERSION = "sedna.io/v1alpha1"
CHILD_KINDS = tuple(f"{kind}.{API_VERSION}" for kind in SEDNA_KINDS)
FAILED_REASON = "SednaFailed"

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
STAGES = {"train": "Train", "eval": "Eval", "deploy": "Deploy"}
"""Stage of the learning kinds (IncrementalLearningJob, LifelongLearningJob) each role works in."""
STAGE_ACTIVE = ("Starting", "Running")
STAGE_WAITING = ("Waiting", "Ready")
STAGE_RAN = ("Starting", "Running", "Completed", "Failed")
ANNOTATION_STAGE_NODE_PREFIX = "sedna.io/"
"""Sedna annotates a learning job with ``sedna.io/<Stage>: <node>`` where a stage's worker ran."""


def child_key(kind: str) -> str:
    return f"{kind}.{API_VERSION}"


# --- desired: the Sedna resource ------------------------------------------------------------


def worker_env(job: DeciceJob, task: Task) -> list[dict[str, Any]]:
    """What a worker learns about its place; the replica index is added per worker.  (No
    subdomain or peers: Sedna connects its workers itself.)"""
    return [
        {"name": podtemplate.ENV_JOB, "value": job.name},
        {"name": podtemplate.ENV_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": podtemplate.ENV_TASK, "value": task.name},
        {"name": podtemplate.ENV_REPLICAS, "value": str(task.replicas)},
    ]


def worker_templates(job: DeciceJob, task: Task, policy: Policy) -> list[dict[str, Any]]:
    """The PodTemplateSpec of each replica of ``task``, from the shared template.

    Only its ``spec``: Sedna's CRDs declare no fields under a template's metadata, so the API
    server would drop labels and annotations (the model refuses them for sedna tasks).  Edge
    workers are bound to the scheduler's node by ``nodeName`` as Sedna expects (it hands the job
    to the LocalController of that node) and get the operator's edge tolerations; cloud workers
    are pinned by required node affinity, which keeps the scheduler in the loop."""
    assert job.spec.sedna is not None
    role = job.spec.sedna.role(task.role)
    edge = role is not None and role.edge
    base = podtemplate.pod_template(job, task, worker_env(job, task))["spec"]
    tolerations = list(base.get("tolerations", []))
    if edge:
        tolerations += [dict(t) for t in policy.edge_tolerations if dict(t) not in tolerations]
    templates = []
    for index in range(task.replicas):
        # A copy per worker: all of them live in one object, which must serialise without aliases.
        spec = copy.deepcopy(base)
        container = spec["containers"][0]
        container["env"] = [{"name": podtemplate.ENV_INDEX, "value": str(index)}] + container["env"]
        node = task.placement.node_for(index)
        if edge:
            if node:
                spec["nodeName"] = node
            if tolerations:
                spec["tolerations"] = copy.deepcopy(tolerations)
        elif affinity := podtemplate.node_affinity(node):
            spec["affinity"] = affinity
        templates.append({"spec": spec})
    return templates


def _ref(name: str | None) -> dict[str, str]:
    assert name, "the model requires every name the kind needs"
    return {"name": name}


def _hard_example_mining(hem: HardExampleMining | None) -> dict[str, Any]:
    assert hem is not None
    out: dict[str, Any] = {"name": hem.name}
    if hem.parameters:
        out["parameters"] = [{"key": key, "value": hem.parameters[key]} for key in sorted(hem.parameters)]
    return out


def _trigger(trigger: Trigger | None) -> dict[str, Any]:
    assert trigger is not None
    out: dict[str, Any] = {}
    if trigger.check_period_seconds is not None:
        out["checkPeriodSeconds"] = trigger.check_period_seconds
    if trigger.timer is not None:
        out["timer"] = {"start": trigger.timer[0], "end": trigger.timer[1]}
    out["condition"] = {"operator": trigger.operator, "threshold": trigger.threshold, "metric": trigger.metric}
    return out


def _transmitter(transmitter: Transmitter | None) -> dict[str, Any]:
    if transmitter is None or transmitter.type != "s3":
        return {"ws": {}}
    s3: dict[str, Any] = {"aggDataPath": transmitter.aggregation_data_path}
    if transmitter.credential_name:
        s3["credentialName"] = transmitter.credential_name
    return {"s3": s3}


Workers = dict[str, list[tuple[Task, list[dict[str, Any]]]]]
"""Role → the tasks with that role, each with the templates of its replicas."""


def _one(workers: Workers, role: str) -> tuple[Task, dict[str, Any]]:
    task, templates = workers[role][0]
    return task, templates[0]


def _joint_inference(sedna: Sedna, workers: Workers) -> dict[str, Any]:
    edge, edge_template = _one(workers, "edge")
    cloud, cloud_template = _one(workers, "cloud")
    return {
        "edgeWorker": {
            "model": _ref(edge.model),
            "hardExampleMining": _hard_example_mining(sedna.hard_example_mining),
            "template": edge_template,
        },
        "cloudWorker": {"model": _ref(cloud.model), "template": cloud_template},
    }


def _federated_learning(sedna: Sedna, workers: Workers) -> dict[str, Any]:
    aggregation, aggregation_template = _one(workers, "aggregation")
    spec: dict[str, Any] = {
        "aggregationWorker": {"model": _ref(aggregation.model), "template": aggregation_template},
        "trainingWorkers": [
            {"dataset": _ref(task.dataset), "template": template}
            for task, templates in workers["training"]
            for template in templates
        ],
    }
    if sedna.pretrained_model:
        spec["pretrainedModel"] = _ref(sedna.pretrained_model)
    spec["transmitter"] = _transmitter(sedna.transmitter)
    return spec


def _learning_data(sedna: Sedna, train: Task) -> dict[str, Any]:
    return {"dataset": {"name": train.dataset, "trainProb": sedna.train_prob}}


def _learning_output(sedna: Sedna) -> dict[str, Any]:
    out: dict[str, Any] = {"outputDir": sedna.output_dir}
    if sedna.credential_name:
        out["credentialName"] = sedna.credential_name
    return out


def _incremental_learning(sedna: Sedna, workers: Workers) -> dict[str, Any]:
    train, train_template = _one(workers, "train")
    evaluation, eval_template = _one(workers, "eval")
    deploy, deploy_template = _one(workers, "deploy")
    eval_spec: dict[str, Any] = {"template": eval_template}
    if evaluation.model:
        eval_spec["initialEvalModel"] = _ref(evaluation.model)
    model: dict[str, Any] = _ref(deploy.model)
    if sedna.model_hot_update is not None:
        model.update(hotUpdateEnabled=True, pollPeriodSeconds=sedna.model_hot_update.poll_period_seconds)
    return {
        **_learning_data(sedna, train),
        "initialModel": _ref(train.model),
        "trainSpec": {"template": train_template, "trigger": _trigger(sedna.train_trigger)},
        "evalSpec": eval_spec,
        "deploySpec": {
            "model": model,
            "trigger": _trigger(sedna.deploy_trigger),
            "hardExampleMining": _hard_example_mining(sedna.hard_example_mining),
            "template": deploy_template,
        },
        **_learning_output(sedna),
    }


def _lifelong_learning(sedna: Sedna, workers: Workers) -> dict[str, Any]:
    train, train_template = _one(workers, "train")
    return {
        **_learning_data(sedna, train),
        "trainSpec": {"template": train_template, "trigger": _trigger(sedna.train_trigger)},
        "evalSpec": {"template": _one(workers, "eval")[1]},
        "deploySpec": {"template": _one(workers, "deploy")[1]},
        **_learning_output(sedna),
    }


SPEC_BUILDERS: dict[str, Callable[[Sedna, Workers], dict[str, Any]]] = {
    "JointInferenceService": _joint_inference,
    "FederatedLearningJob": _federated_learning,
    "IncrementalLearningJob": _incremental_learning,
    "LifelongLearningJob": _lifelong_learning,
}


def sedna_resource(job: DeciceJob, tasks: tuple[Task, ...], policy: Policy) -> dict[str, Any]:
    """The Sedna resource of the job, built from the spec alone."""
    sedna = job.spec.sedna
    assert sedna is not None, "the model refuses runtime sedna without spec.sedna"
    workers: Workers = {}
    for task in tasks:
        workers.setdefault(task.role or "", []).append((task, worker_templates(job, task, policy)))
    return {
        "apiVersion": API_VERSION,
        "kind": sedna.kind,
        "metadata": {
            "name": names.sedna_name(job.name),
            "namespace": job.namespace,
            "labels": names.job_labels(job.name),
        },
        "spec": SPEC_BUILDERS[sedna.kind](sedna, workers),
    }


# --- observe: status read back from the Sedna resource ------------------------------------


@dataclass(frozen=True)
class Condition:
    """One entry of a Sedna resource's ``status.conditions`` (``stage`` for the learning kinds)."""

    type: str
    status: str
    reason: str
    message: str
    stage: str

    def describe(self) -> str:
        return ": ".join(part for part in (self.type, self.reason, self.message) if part)


@dataclass(frozen=True)
class SednaView:
    """The fields of the observed Sedna resource the hook reads, read defensively."""

    kind: str
    name: str
    phase: str
    started: bool
    conditions: tuple[Condition, ...]
    failed_workers: int | None
    nodes: dict[str, tuple[str, ...]]
    annotations: dict[str, str]

    def true(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind and c.status == "True"), None)

    @property
    def latest(self) -> Condition | None:
        """Sedna appends conditions; the newest is its current state."""
        return self.conditions[-1] if self.conditions else None


def _conditions(status: dict) -> tuple[Condition, ...]:
    return tuple(
        Condition(c["type"], as_str(c.get("status")), as_str(c.get("reason")), as_str(c.get("message")).strip(),
                  as_str(c.get("stage")))
        for c in as_list(status.get("conditions"))
        if isinstance(c, dict) and isinstance(c.get("type"), str)
    )


def _templates(value: Any, depth: int = 0) -> Iterator[dict]:
    """Every worker template in a Sedna spec (any ``template`` object, in lists too)."""
    if depth > 3:
        return
    if isinstance(value, list):
        for item in value:
            yield from _templates(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "template" and isinstance(item, dict):
                yield item
            else:
                yield from _templates(item, depth + 1)


def _template_nodes(spec: dict) -> dict[str, tuple[str, ...]]:
    """Task name (the worker's container) → the nodes its workers are bound to by nodeName."""
    nodes: dict[str, set[str]] = {}
    for template in _templates(spec):
        pod = as_dict(template.get("spec"))
        containers = as_list(pod.get("containers"))
        task = as_str(as_dict(containers[0]).get("name")) if containers else ""
        if task and as_str(pod.get("nodeName")):
            nodes.setdefault(task, set()).add(pod["nodeName"])
    return {task: tuple(sorted(found)) for task, found in nodes.items()}


def sedna_view(kind: str, obj: dict) -> SednaView:
    meta, status = as_dict(obj.get("metadata")), as_dict(obj.get("status"))
    failed = status.get("failed")
    return SednaView(
        kind=kind,
        name=as_str(meta.get("name")),
        phase=as_str(status.get("phase")),
        started=bool(status.get("startTime")),
        conditions=_conditions(status),
        failed_workers=failed if isinstance(failed, int) and not isinstance(failed, bool) else None,
        nodes=_template_nodes(as_dict(obj.get("spec"))),
        annotations={k: v for k, v in as_dict(meta.get("annotations")).items() if isinstance(v, str)},
    )


@dataclass(frozen=True)
class Reading:
    """What one Sedna resource says: task statuses, a terminal failure, whether Sedna is done."""

    tasks: tuple[TaskStatus, ...]
    failure: tuple[str, str] | None = None
    finished: bool = False


def _whole(task: Task, phase: str, message: str, nodes: tuple[str, ...]) -> TaskStatus:
    """A task of a kind whose status covers the whole resource: every worker of the task is
    counted in the bucket of the resource's phase."""
    count = task.replicas
    return TaskStatus(
        name=task.name,
        runtime=NAME,
        phase=phase,
        replicas=count,
        pending=count if phase == PENDING else 0,
        running=count if phase == RUNNING else 0,
        ready=count if phase == RUNNING else 0,
        succeeded=count if phase == SUCCEEDED else 0,
        nodes=nodes if phase in (RUNNING, SUCCEEDED) else (),
        message=message,
        counts_failures=False,
    )


def _failure(view: SednaView, failed: Condition | None) -> tuple[str, str]:
    detail = failed.describe() if failed is not None else f"phase {view.phase}"
    if view.failed_workers:
        detail += f" ({view.failed_workers} failed worker{'s' if view.failed_workers != 1 else ''})"
    return FAILED_REASON, f"{view.kind} {view.name} failed: {detail}"


def _read_joint_inference(tasks: tuple[Task, ...], view: SednaView) -> Reading:
    """A service: Pending, then Running for as long as it exists; Failed is terminal."""
    failed = view.true("Failed")
    latest = view.latest
    if failed is not None:
        phase = FAILED
    elif latest is not None and latest.type == "Running":
        phase = RUNNING
    else:
        phase = PENDING
    message = latest.describe() if latest is not None else ""
    statuses = tuple(_whole(t, phase, message, view.nodes.get(t.name, ())) for t in tasks)
    if failed is not None:
        return Reading(statuses, _failure(view, failed), finished=True)
    return Reading(statuses)


def _read_federated_learning(tasks: tuple[Task, ...], view: SednaView) -> Reading:
    failed = view.true("Failed")
    if failed is not None or view.phase == FAILED:
        phase = FAILED
    elif view.true("Complete") is not None or view.phase == SUCCEEDED:
        phase = SUCCEEDED
    elif view.phase == RUNNING or view.true("Training") is not None:
        phase = RUNNING
    else:
        phase = PENDING
    latest = view.latest
    message = latest.describe() if latest is not None else ""
    statuses = tuple(_whole(t, phase, message, view.nodes.get(t.name, ())) for t in tasks)
    if phase == FAILED:
        return Reading(statuses, _failure(view, failed), finished=True)
    return Reading(statuses, finished=phase == SUCCEEDED)


def _read_learning(tasks: tuple[Task, ...], view: SednaView) -> Reading:
    """A continuous loop (train → eval → deploy → train …) that Sedna never finishes.  A task is
    Pending until its stage first ran, Running afterwards; the counts say what its stage does
    now (running / pending) and did (succeeded / failed runs)."""
    staged = tuple(c for c in view.conditions if c.stage)
    latest = staged[-1] if staged else None
    statuses = []
    for task in tasks:
        stage = STAGES.get(task.role or "", "")
        runs = [c for c in staged if c.stage == stage]
        current = latest is not None and latest.stage == stage
        # Sedna starts an IncrementalLearningJob's inference worker as soon as it takes the job.
        serving = task.role == "deploy" and view.kind == "IncrementalLearningJob" and (view.started or bool(staged))
        ran = serving or any(c.type in STAGE_RAN for c in runs)
        running = int(current and latest is not None and latest.type in STAGE_ACTIVE)
        if current and latest is not None:
            message = f"stage {stage}: {latest.describe()}"
        elif runs and runs[-1].type == "Failed":
            message = f"last {stage} run: {runs[-1].describe()}"
        else:
            message = ""
        node = view.annotations.get(ANNOTATION_STAGE_NODE_PREFIX + stage, "")
        nodes = tuple(sorted({*view.nodes.get(task.name, ()), *([node] if node else [])}))
        statuses.append(TaskStatus(
            name=task.name,
            runtime=NAME,
            phase=RUNNING if ran else PENDING,
            replicas=task.replicas,
            pending=int(current and latest is not None and latest.type in STAGE_WAITING),
            running=running,
            ready=running,
            succeeded=sum(c.type == "Completed" for c in runs),
            failed=sum(c.type == "Failed" for c in runs),
            nodes=nodes if ran else (),
            message=message,
            counts_failures=False,
        ))
    return Reading(tuple(statuses))


READERS: dict[str, Callable[[tuple[Task, ...], SednaView], Reading]] = {
    "JointInferenceService": _read_joint_inference,
    "FederatedLearningJob": _read_federated_learning,
    "IncrementalLearningJob": _read_learning,
    "LifelongLearningJob": _read_learning,
}


@dataclass(frozen=True)
class Observed:
    """``Observation.detail``: whether the Sedna resource exists, and whether Sedna is done with it."""

    exists: bool
    finished: bool = False


def observe(job: DeciceJob, tasks: tuple[Task, ...], children: Children, now: datetime) -> Observation:
    assert job.spec.sedna is not None
    kind = job.spec.sedna.kind
    obj = as_dict(children.get(child_key(kind))).get(names.sedna_name(job.name))
    # Every observed Sedna resource runs workers until it is gone (one of another kind too,
    # left from before an edit of spec.sedna.kind).
    workloads = sum(len(as_dict(children.get(key))) for key in CHILD_KINDS)
    if not isinstance(obj, dict):
        waiting = tuple(
            TaskStatus(name=t.name, runtime=NAME, phase=PENDING, replicas=t.replicas, started=False,
                       counts_failures=False)
            for t in tasks
        )
        return Observation(tasks=waiting, workloads=workloads, detail=Observed(exists=False))
    reading = READERS[kind](tasks, sedna_view(kind, obj))
    return Observation(tasks=reading.tasks, failure=reading.failure, workloads=workloads,
                       detail=Observed(exists=True, finished=reading.finished))


def desired(
    job: DeciceJob, tasks: tuple[Task, ...], children: Children, observation: Observation, plan: Plan, now: datetime,
    policy: Policy, memo: Memo = NO_MEMO,
) -> list[dict[str, Any]]:
    """The Sedna resource, while the plan wants it: created once every task may start, kept
    while active (``keep_active``) or, once Sedna is done with it, while ``keep_finished``."""
    observed = observation.detail if isinstance(observation.detail, Observed) else Observed(exists=False)
    if not observed.exists:
        wanted = all(t.name in plan.start for t in tasks)
    else:
        wanted = plan.keep_finished if observed.finished else plan.keep_active
    return [sedna_resource(job, tasks, policy)] if wanted else []
