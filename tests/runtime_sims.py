"""Stand-ins for Volcano and KubeEdge in the protocol-driver tests.

``VolcanoSim`` plays Volcano's job controller and scheduler for the Volcano Jobs
a DeciceJob owns in a ``Cluster``: it keeps their pods to itself (they are the
Volcano Job's children, never sent to the hooks) and writes ``status`` the way
``pkg/controllers/job`` does — ``state.phase`` through Volcano's state machine,
pod counts, ``taskStatusCount`` keyed by task and pod phase, ``retryCount`` —
with the lifecycle policies the hooks set (RestartJob on PodFailed/PodEvicted,
TerminateJob on TaskFailed).  ``EdgeApplicationSim`` plays KubeEdge's
EdgeApplication status manager: one ``status.workloadStatus`` entry per node
group's Deployment, ``Processing`` until all its replicas are ready, then
``Available``.  ``runtime_controller`` builds the Metacontroller stand-in with
runtime components, validating every child it creates against its schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.driver import Cluster, Controller, FlaskTransport, load_controller
from tests.schemas import REFERENCE_CRDS, CRDValidator, builtin_errors

VOLCANO_JOB = "Job.batch.volcano.sh/v1alpha1"
EDGE_APPLICATION = "EdgeApplication.apps.kubeedge.io/v1alpha1"
ACTIVE = ("Pending", "Running")
FINISHED = ("Completed", "Failed", "Terminated", "Aborted")


def reference_validator(*parts: str) -> CRDValidator | None:
    """The validator of a reference CRD, or None when ``../shared/reference-crds`` is absent."""
    path = REFERENCE_CRDS.joinpath(*parts)
    return CRDValidator.from_file(path) if path.is_file() else None


def child_errors(child: dict) -> list[str]:
    """Schema errors of a generated child: built-in kinds against Kubernetes, Volcano Jobs and
    EdgeApplications against their reference CRDs (when present) and their embedded pod
    templates / Deployments against Kubernetes."""
    name = f"{child['kind']} {child['metadata']['name']}"
    key = f"{child['kind']}.{child['apiVersion']}"
    if key == VOLCANO_JOB:
        crd = reference_validator("volcano", "batch.volcano.sh_jobs.yaml")
        errors = crd.errors(child) if crd else []
        for task in child["spec"]["tasks"]:
            template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": task["name"]},
                        "template": task["template"]}
            errors += [f"task {task['name']}: {e}" for e in builtin_errors(template)]
    elif key == EDGE_APPLICATION:
        crd = reference_validator("kubeedge", "apps_v1alpha1_edgeapplication.yaml")
        errors = crd.errors(child) if crd else []
        for manifest in child["spec"]["workloadTemplate"]["manifests"]:
            errors += [f"manifest {manifest['metadata']['name']}: {e}" for e in builtin_errors(manifest)]
    else:
        errors = builtin_errors(child)
    return [f"{name}: {e}" for e in errors]


def runtime_controller(cluster: Cluster, app: Any, crd_validator: CRDValidator, *components: str) -> Controller:
    """Metacontroller (v2 hooks) with the given runtime components, validating the DeciceJob
    status against its CRD and every child against its schema after each sync."""

    def validate(job: dict) -> list[str]:
        errors = crd_validator.errors(job)
        for child in cluster.children_of(job):
            errors += child_errors(child)
        return errors

    return Controller(cluster, FlaskTransport(app), controller=load_controller(*components), validate=validate)


def assert_replay_is_byte_identical(controller: Controller, client: Any, job: dict) -> None:
    """The controller's last request, sent twice more, yields the same bytes, and the status the
    job already carries (a settled job's status does not move)."""
    body = controller.last_request
    first = client.post("/sync", data=body, content_type="application/json").get_data()
    second = client.post("/sync", data=body, content_type="application/json").get_data()
    assert first == second
    assert json.loads(first)["status"] == job["status"]


# --- Volcano ---------------------------------------------------------------------------------


@dataclass
class VolcanoPod:
    task: str
    index: int
    phase: str = "Pending"
    restarts: int = 0


@dataclass
class VolcanoState:
    pods: dict[tuple[str, int], VolcanoPod] = field(default_factory=dict)


class VolcanoSim:
    """Volcano's controller for the Volcano Jobs of DeciceJobs in ``cluster``."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.states: dict[str, VolcanoState] = {}

    def job(self, parent: dict) -> dict:
        (vcjob,) = self.cluster.children_of(parent, VOLCANO_JOB)
        return vcjob

    def exists(self, parent: dict) -> bool:
        return bool(self.cluster.children_of(parent, VOLCANO_JOB))

    def _state(self, vcjob: dict) -> VolcanoState:
        return self.states.setdefault(vcjob["metadata"]["uid"], VolcanoState())

    def admit(self, parent: dict) -> dict:
        """Volcano's mutating webhook on create: defaults the Job's spec (the hooks never read it back
        except ``maxRetry``)."""
        vcjob = self.job(parent)
        spec = vcjob["spec"]
        spec.setdefault("queue", "default")
        spec.setdefault("maxRetry", 3)
        for task in spec["tasks"]:
            task.setdefault("minAvailable", task["replicas"])
            task.setdefault("maxRetry", 3)
        return vcjob

    def sync(self, parent: dict) -> dict:
        """One pass of the job controller: create the pods of every task whose ``dependsOn`` tasks
        are ready or succeeded, then write the status."""
        vcjob = self.job(parent)
        state = self._state(vcjob)
        phase = vcjob.get("status", {}).get("state", {}).get("phase", "Pending")
        if phase not in FINISHED and phase not in ("Terminating", "Aborting"):
            for task in vcjob["spec"]["tasks"]:
                if all(self._dependency_ready(vcjob, dep) for dep in task.get("dependsOn", {}).get("name", [])):
                    for index in range(task["replicas"]):
                        state.pods.setdefault((task["name"], index), VolcanoPod(task["name"], index))
        self._write_status(vcjob, self._next_phase(vcjob, phase))
        return vcjob

    def _dependency_ready(self, vcjob: dict, name: str) -> bool:
        """Volcano's isDependsOnPodsReady: every pod of the task succeeded, or runs with all its
        containers ready (a container with a readiness probe is not ready before it passes; the
        probes the hooks set never run)."""
        task = next(t for t in vcjob["spec"]["tasks"] if t["name"] == name)
        probed = any("readinessProbe" in c for c in task["template"]["spec"]["containers"])
        pods = [p for p in self._state(vcjob).pods.values() if p.task == name]
        ready = [p for p in pods if p.phase == "Succeeded" or (p.phase == "Running" and not probed)]
        return len(pods) == task["replicas"] and len(ready) >= task.get("minAvailable", task["replicas"])

    def _counts(self, vcjob: dict) -> dict[str, int]:
        pods = self._state(vcjob).pods.values()
        return {phase: sum(p.phase == phase for p in pods) for phase in ("Pending", "Running", "Succeeded", "Failed")}

    def _next_phase(self, vcjob: dict, phase: str) -> str:
        """Volcano's state machine for a sync without a policy action."""
        counts = self._counts(vcjob)
        total = sum(t["replicas"] for t in vcjob["spec"]["tasks"])
        min_available = vcjob["spec"]["minAvailable"]
        if phase == "Restarting":
            return "Pending"
        if phase in ("Terminating", "Aborting", "Completing"):
            alive = counts["Pending"] + counts["Running"]
            return phase if alive else {"Terminating": "Terminated", "Aborting": "Aborted", "Completing": "Completed"}[phase]
        if phase == "Pending" and min_available <= counts["Running"] + counts["Succeeded"] + counts["Failed"]:
            phase = "Running"
        if phase == "Running" and counts["Succeeded"] + counts["Failed"] == total:
            return "Completed" if counts["Succeeded"] >= min_available else "Failed"
        return phase

    def _write_status(self, vcjob: dict, phase: str, reason: str = "", message: str = "") -> None:
        state = self._state(vcjob)
        status = vcjob.setdefault("status", {})
        previous = status.get("state", {}).get("phase")
        counts = self._counts(vcjob)
        per_task: dict[str, dict[str, dict[str, int]]] = {}
        for pod in state.pods.values():
            phases = per_task.setdefault(pod.task, {"phase": {}})["phase"]
            phases[pod.phase] = phases.get(pod.phase, 0) + 1
        status.update(
            pending=counts["Pending"], running=counts["Running"], succeeded=counts["Succeeded"],
            failed=counts["Failed"], minAvailable=vcjob["spec"]["minAvailable"], taskStatusCount=per_task,
            controlledResources={"plugin-env": "env", "plugin-svc": "svc"},
        )
        status.setdefault("retryCount", 0)
        if phase != previous or "state" not in status:
            now = self.cluster.clock.stamp()
            status["state"] = {"phase": phase, "lastTransitionTime": now}
            status.setdefault("conditions", []).append({"status": phase, "lastTransitionTime": now})
        if reason:
            status["state"].update(reason=reason, message=message)

    def run(self, parent: dict, task: str | None = None) -> dict:
        """The scheduler binds the gang and the kubelets start the pods (all pending ones, or one
        task's), provided the gang is complete: at least minAvailable pods exist."""
        vcjob = self.sync(parent)
        pods = self._state(vcjob).pods.values()
        if len(pods) >= vcjob["spec"]["minAvailable"]:
            for pod in pods:
                if pod.phase == "Pending" and task in (None, pod.task):
                    pod.phase = "Running"
        return self.sync(parent)

    def succeed(self, parent: dict, task: str) -> dict:
        vcjob = self.job(parent)
        for pod in self._state(vcjob).pods.values():
            if pod.task == task and pod.phase in ACTIVE:
                pod.phase = "Succeeded"
        return self.sync(parent)

    def fail(self, parent: dict, task: str, index: int = 0, event: str = "PodFailed") -> dict:
        """A pod fails (or is evicted: ``event="PodEvicted"``); the job policy RestartJob kills every
        pod and bumps retryCount; Restarting then fails the Job once retryCount reaches maxRetry."""
        vcjob = self.job(parent)
        state = self._state(vcjob)
        state.pods[(task, index)].phase = "Failed"
        status = vcjob.setdefault("status", {})
        status["retryCount"] = status.get("retryCount", 0) + 1
        state.pods.clear()
        self._write_status(vcjob, "Restarting", event, f"pod {task}-{index}: {event}")
        if status["retryCount"] >= vcjob["spec"]["maxRetry"]:
            self._write_status(vcjob, "Failed", event, "max retry reached")
        return vcjob

    def crash_loop(self, parent: dict, task: str, restarts: int) -> dict:
        """An OnFailure container restarts in place; once the restarts reach the task's maxRetry,
        TaskFailed fires and the task policy TerminateJob ends the Job."""
        vcjob = self.job(parent)
        spec = next(t for t in vcjob["spec"]["tasks"] if t["name"] == task)
        pods = [p for p in self._state(vcjob).pods.values() if p.task == task and p.phase in ACTIVE]
        for pod in pods:
            pod.restarts = restarts
        if spec.get("policies") and sum(p.restarts for p in pods) >= spec.get("maxRetry", 3):
            for pod in self._state(vcjob).pods.values():
                if pod.phase in ACTIVE:
                    pod.phase = "Failed"
            self._write_status(vcjob, "Terminating", "TaskFailed", f"task {task} restarted too often")
            return self.sync(parent)
        return vcjob


# --- KubeEdge --------------------------------------------------------------------------------


class EdgeApplicationSim:
    """KubeEdge's EdgeApplication controller and status manager, for status only."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def application(self, parent: dict, name: str) -> dict:
        return next(a for a in self.cluster.children_of(parent, EDGE_APPLICATION) if a["metadata"]["name"] == name)

    def process(self, parent: dict, name: str, available: tuple[str, ...] = ()) -> dict:
        """Write one workloadStatus entry per node group's Deployment (``<manifest>-<group>``):
        Available for the groups in ``available``, Processing for the others.  New entries carry
        the kind in ``version``, as KubeEdge's controller writes them."""
        app = self.application(parent, name)
        deployment = app["spec"]["workloadTemplate"]["manifests"][0]
        entries = []
        for group in app["spec"]["workloadScope"]["targetNodeGroups"]:
            ready = group["name"] in available
            entries.append({
                "identifier": {
                    "ordinal": 0, "group": "apps", "version": "v1" if ready else "Deployment", "kind": "Deployment",
                    "namespace": deployment["metadata"]["namespace"],
                    "name": f"{deployment['metadata']['name']}-{group['name']}",
                },
                "conditions": "Available" if ready else "Processing",
            })
        app["status"] = {"workloadStatus": sorted(entries, key=lambda e: e["identifier"]["name"])}
        return app
