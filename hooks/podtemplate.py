"""The one Pod template builder every runtime uses.

``pod_template`` turns a task into a PodTemplateSpec (metadata + spec) that is
the same for all its replicas; runtimes add what differs per replica (name,
host name, node pinning, index) or wrap the template in their own object
(a Volcano task, a Deployment, a Sedna worker).  Built once per task per sync
and shared read-only between the replicas' pods, so it must never be mutated
after it is returned.
"""

from __future__ import annotations

from typing import Any

from hooks import names
from hooks.model import DeciceJob, Task

HOSTNAME_LABEL = "kubernetes.io/hostname"

ENV_JOB = "DECICE_JOB_NAME"
ENV_NAMESPACE = "DECICE_NAMESPACE"
ENV_TASK = "DECICE_TASK_NAME"
ENV_INDEX = "DECICE_TASK_INDEX"
ENV_REPLICAS = "DECICE_TASK_REPLICAS"
ENV_SUBDOMAIN = "DECICE_SUBDOMAIN"
ENV_TASKS = "DECICE_TASKS"


def peer_tasks(job: DeciceJob) -> str:
    """``task:replicas`` of every task whose pods are reachable as ``<task>-<i>.<subdomain>``."""
    return ",".join(f"{t.name}:{t.replicas}" for t in job.spec.tasks if t.runtime == "kubernetes")


def job_env(job: DeciceJob, task: Task) -> list[dict[str, Any]]:
    """Env telling a pod its job, task and peers; the replica index is added per pod."""
    return [
        {"name": ENV_JOB, "value": job.name},
        {"name": ENV_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": ENV_TASK, "value": task.name},
        {"name": ENV_REPLICAS, "value": str(task.replicas)},
        {"name": ENV_SUBDOMAIN, "value": names.service_name(job.name)},
        {"name": ENV_TASKS, "value": peer_tasks(job)},
    ]


def resources(task: Task) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if task.resources.requests:
        out["requests"] = dict(task.resources.requests)
    if task.resources.limits:
        out["limits"] = dict(task.resources.limits)
    return out


def container(job: DeciceJob, task: Task, env: list[dict[str, Any]]) -> dict[str, Any]:
    """The task's single container; ``env`` comes first so user values can reference it."""
    spec: dict[str, Any] = {"name": task.name, "image": task.image}
    if task.command:
        spec["command"] = list(task.command)
    if task.args:
        spec["args"] = list(task.args)
    spec["env"] = env + [dict(e) for e in task.env]
    if task.working_dir:
        spec["workingDir"] = task.working_dir
    if res := resources(task):
        spec["resources"] = res
    if task.ports:
        spec["ports"] = [
            {"containerPort": p.container_port, "protocol": p.protocol, **({"name": p.name} if p.name else {})}
            for p in task.ports
        ]
    if task.volume_mounts:
        spec["volumeMounts"] = [
            {
                "name": m.volume,
                "mountPath": m.mount_path,
                **({"subPath": m.sub_path} if m.sub_path else {}),
                **({"readOnly": True} if m.read_only else {}),
            }
            for m in task.volume_mounts
        ]
    return spec


def pod_volumes(job: DeciceJob, task: Task) -> list[dict[str, Any]]:
    """One pod volume per job volume the task mounts, backed by the job's (or an existing) claim."""
    seen: list[str] = []
    for mount in task.volume_mounts:
        if mount.volume not in seen:
            seen.append(mount.volume)
    out = []
    for volume_name in seen:
        volume = job.spec.volume(volume_name)
        claim = volume.existing_claim or names.claim_name(job.name, volume.name)
        out.append({"name": volume.name, "persistentVolumeClaim": {"claimName": claim}})
    return out


def node_affinity(node: str | None, expressions: tuple[dict, ...] = ()) -> dict[str, Any] | None:
    """Required node affinity pinning to ``node`` (by host name label), ANDed with ``expressions``.

    Pinning by affinity rather than ``nodeName`` keeps the scheduler in the loop, so resource
    fit, taints and volume topology are still checked."""
    match = list(expressions)
    if node:
        match.append({"key": HOSTNAME_LABEL, "operator": "In", "values": [node]})
    if not match:
        return None
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": match}]}
        }
    }


def pod_labels(job: DeciceJob, task: Task) -> dict[str, str]:
    """The task's own labels, then ours (which the user cannot override)."""
    return {**task.labels, **names.task_labels(job.name, task.name)}


def pod_template(job: DeciceJob, task: Task, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """PodTemplateSpec shared by all replicas of ``task`` (no per-replica fields)."""
    spec: dict[str, Any] = {
        "restartPolicy": task.restart_policy,
        "enableServiceLinks": False,
        "containers": [container(job, task, job_env(job, task) if env is None else env)],
    }
    if volumes := pod_volumes(job, task):
        spec["volumes"] = volumes
    if task.placement.node_selector:
        spec["nodeSelector"] = dict(task.placement.node_selector)
    if task.placement.tolerations:
        spec["tolerations"] = [dict(t) for t in task.placement.tolerations]
    if task.service_account_name:
        spec["serviceAccountName"] = task.service_account_name
    if job.spec.scheduler_name:
        spec["schedulerName"] = job.spec.scheduler_name
    if job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
    metadata: dict[str, Any] = {"labels": pod_labels(job, task)}
    if task.annotations:
        metadata["annotations"] = dict(task.annotations)
    return {"metadata": metadata, "spec": spec}
