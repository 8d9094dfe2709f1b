"""The ``kubeedge`` runtime: tasks on KubeEdge edge nodes.

A batch task (and a service task without node groups) runs as Pods made exactly as
the ``kubernetes`` runtime makes them — one per replica, retried the same way —
bound to edge nodes: required node affinity on the edge role label, ANDed with the
scheduler's node, plus the tolerations the operator configured for edge taints.

A service task (``restartPolicy: Always``) with ``placement.nodeGroups`` becomes an
``apps.kubeedge.io/v1alpha1`` EdgeApplication wrapping an ``apps/v1`` Deployment:
KubeEdge creates one Deployment per node group (``<app>-<group>``, the group's
replica count from its overrider, the node-group label as its ``nodeSelector``) and
reports per Deployment whether all its replicas are ready (``status.workloadStatus``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from hooks import names, podtemplate
from hooks.memo import NO_MEMO, Memo
from hooks.model import DeciceJob, Task
from hooks.policy import Policy
from hooks.read import as_dict, as_list
from hooks.runtimes import kubernetes
from hooks.runtimes.base import Children, Observation, Plan, TaskStatus

NAME = "kubeedge"
API_VERSION = "apps.kubeedge.io/v1alpha1"
EDGE_APPLICATION = f"EdgeApplication.{API_VERSION}"
CHILD_KINDS = (kubernetes.POD, EDGE_APPLICATION)
COMPONENT = "manifests/components/kubeedge"

EDGE_ROLE_LABEL = "node-role.kubernetes.io/edge"
EDGE_NODES = ({"key": EDGE_ROLE_LABEL, "operator": "Exists"},)
AVAILABLE = "Available"


def is_application(task: Task) -> bool:
    """A service task placed on node groups runs as an EdgeApplication; every other task as Pods."""
    return task.is_service and bool(task.placement.node_groups)


def needed_kinds(tasks: tuple[Task, ...]) -> tuple[str, ...]:
    kinds = []
    if not all(is_application(t) for t in tasks):
        kinds.append(kubernetes.POD)
    if any(is_application(t) for t in tasks):
        kinds.append(EDGE_APPLICATION)
    return tuple(kinds)


def on_edge(task: Task, policy: Policy) -> Task:
    """The task with the operator's edge tolerations added to its own."""
    extra = tuple(t for t in policy.edge_tolerations if t not in task.placement.tolerations)
    return replace(task, placement=replace(task.placement, tolerations=task.placement.tolerations + extra))


def node_group_conditions(children: Children, job: DeciceJob, task: Task) -> dict[str, str] | None:
    """Node group → condition (``Available``/``Processing``) of its Deployment, from the observed
    EdgeApplication's ``status.workloadStatus`` (None: no EdgeApplication observed).  Entries are
    matched by the Deployment name KubeEdge derives for each group."""
    name = names.edge_application_name(job.name, task.name)
    obj = as_dict(as_dict(children.get(EDGE_APPLICATION)).get(name))
    if not obj:
        return None
    by_deployment = {}
    for entry in as_list(as_dict(obj.get("status")).get("workloadStatus")):
        identifier = as_dict(as_dict(entry).get("identifier"))
        if identifier.get("kind") == "Deployment" and isinstance(identifier.get("name"), str):
            by_deployment[identifier["name"]] = str(as_dict(entry).get("conditions") or "")
    return {g.name: by_deployment.get(f"{name}-{g.name}", "") for g in task.placement.node_groups}


def _application_status(task: Task, conditions: dict[str, str] | None) -> TaskStatus:
    """Replicas are the node groups' sum; a group's replicas count as running and ready once
    KubeEdge reports its Deployment Available (it reports nothing finer)."""
    groups = task.placement.node_groups
    replicas = sum(g.replicas for g in groups)
    if conditions is None:
        return TaskStatus(task.name, NAME, "Pending", replicas, started=False)
    ready = sum(g.replicas for g in groups if conditions[g.name] == AVAILABLE)
    waiting = [g.name for g in groups if conditions[g.name] != AVAILABLE]
    return TaskStatus(
        name=task.name,
        runtime=NAME,
        phase="Running" if len(waiting) < len(groups) else "Pending",
        replicas=replicas,
        pending=replicas - ready,
        running=ready,
        ready=ready,
        message=f"node groups not available yet: {', '.join(waiting)}" if waiting else "",
    )


def observe(job: DeciceJob, tasks: tuple[Task, ...], children: Children, now: datetime) -> Observation:
    pods = kubernetes.observe(job, tuple(t for t in tasks if not is_application(t)), children, now)
    applications = {t.name: node_group_conditions(children, job, t) for t in tasks if is_application(t)}
    pod_status = {s.name: s for s in pods.tasks}
    statuses = tuple(
        pod_status[t.name] if t.name in pod_status else _application_status(t, applications[t.name]) for t in tasks
    )
    return Observation(
        tasks=statuses,
        stuck=pods.stuck,
        retry_at=pods.retry_at,
        workloads=pods.workloads + sum(c is not None for c in applications.values()),
        detail=(pods, applications),
    )


def deployment_placement(task: Task) -> dict[str, Any]:
    """Required node affinity for the Deployment's pods: edge nodes, the task's node selector and
    the scheduler's nodes.  KubeEdge replaces the Deployment's ``nodeSelector`` with its node-group
    label, so the task's selector is carried as affinity instead."""
    expressions = list(EDGE_NODES)
    expressions += [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(task.placement.node_selector.items())]
    if task.placement.nodes:
        nodes = list(dict.fromkeys(task.placement.nodes))
        expressions.append({"key": podtemplate.HOSTNAME_LABEL, "operator": "In", "values": nodes})
    return podtemplate.node_affinity(None, tuple(expressions)) or {}


def edge_application(job: DeciceJob, task: Task, policy: Policy) -> dict[str, Any]:
    """The EdgeApplication of a service task: one Deployment manifest, one target per node group
    with that group's replica count."""
    name = names.edge_application_name(job.name, task.name)
    labels = names.task_labels(job.name, task.name)
    template = podtemplate.pod_template(job, on_edge(task, policy))
    spec = dict(template["spec"])
    spec.pop("nodeSelector", None)
    spec["affinity"] = deployment_placement(task)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": job.namespace, "labels": dict(labels)},
        "spec": {
            "replicas": task.replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": template["metadata"], "spec": spec},
        },
    }
    targets = [{"name": g.name, "overriders": {"replicas": g.replicas}} for g in task.placement.node_groups]
    return {
        "apiVersion": API_VERSION,
        "kind": "EdgeApplication",
        "metadata": {"name": name, "namespace": job.namespace, "labels": labels},
        "spec": {"workloadTemplate": {"manifests": [deployment]}, "workloadScope": {"targetNodeGroups": targets}},
    }


def desired(
    job: DeciceJob, tasks: tuple[Task, ...], children: Children, observation: Observation, plan: Plan, now: datetime,
    policy: Policy, memo: Memo = NO_MEMO,
) -> list[dict[str, Any]]:
    """Pods as the kubernetes runtime makes them, on edge nodes; an EdgeApplication per service task
    on node groups, created when the task may start and kept while the plan keeps active children."""
    pods, applications = observation.detail
    pod_tasks = tuple(on_edge(t, policy) for t in tasks if not is_application(t))
    out = kubernetes.desired(job, pod_tasks, children, pods, plan, now, policy, memo, node_expressions=EDGE_NODES)
    for task in tasks:
        if not is_application(task):
            continue
        observed = applications[task.name] is not None
        wanted = plan.keep_active if observed else task.name in plan.start
        if wanted:
            out.append(edge_application(job, task, policy))
    return out
