"""A Metacontroller stand-in that plays the CompositeController protocol over HTTP.

``Cluster`` holds objects in memory.  ``Controller.sync(job)`` builds the hook
request the way Metacontroller does (``controller``, ``parent``, ``children``
keyed ``<Kind>.<apiVersion>`` with an entry for every child resource rule —
v1 keys ``name``, v2 keys ``namespace/name`` — ``related``, ``finalizing``),
POSTs it, checks the response the way strict v2 unmarshalling and
Metacontroller's invariants do, and applies it: new children are created
(uid, creationTimestamp, ``controller-uid`` label, ownerReference), omitted
ones deleted, existing ones updated only with the ``InPlace`` strategy, and the
parent's status replaced.  ``Kubelet`` advances pods the way a kubelet and the
scheduler would, stamping the cluster clock.
"""

from __future__ import annotations

import copy
import itertools
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from hooks.timeutil import format_time

ROOT = Path(__file__).resolve().parents[1]
RESPONSE_KEYS = {"status", "children", "resyncAfterSeconds", "finalized"}


class Clock:
    """The cluster's time; the hook app under test may share it (create_app(clock=...))."""

    def __init__(self, start: datetime | None = None):
        self.now = (start or datetime.now(timezone.utc)).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def stamp(self, seconds_ago: float = 0) -> str:
        return format_time(self.now - timedelta(seconds=seconds_ago))


def load_controller(*components: str) -> dict:
    """The CompositeController the manifests ship, with the named runtime components
    (``manifests/components/<name>``) applied the way kustomize would: their JSON 6902
    ``add`` patches targeting the CompositeController, inline or from a file."""
    controller = yaml.safe_load((ROOT / "manifests" / "base" / "compositecontroller.yaml").read_text())
    for name in components:
        directory = ROOT / "manifests" / "components" / name
        component = yaml.safe_load((directory / "kustomization.yaml").read_text())
        for patch in component.get("patches", []):
            if patch.get("target", {}).get("kind") != "CompositeController":
                continue
            text = patch["patch"] if "patch" in patch else (directory / patch["path"]).read_text()
            for op in yaml.safe_load(text):
                if op["op"] != "add" or not op["path"].startswith("/spec/childResources"):
                    raise ValueError(f"unsupported CompositeController patch in {name}: {op}")
                controller["spec"]["childResources"].append(op["value"])
    return controller


def child_key(obj: dict) -> str:
    return f"{obj['kind']}.{obj['apiVersion']}"


def resource_key(rule: dict) -> tuple[str, str]:
    return rule["apiVersion"], rule["resource"]


KIND_OF_RESOURCE = {
    ("v1", "pods"): "Pod",
    ("v1", "persistentvolumeclaims"): "PersistentVolumeClaim",
    ("v1", "services"): "Service",
    ("batch.volcano.sh/v1alpha1", "jobs"): "Job",
    ("apps.kubeedge.io/v1alpha1", "edgeapplications"): "EdgeApplication",
    ("sedna.io/v1alpha1", "jointinferenceservices"): "JointInferenceService",
    ("sedna.io/v1alpha1", "federatedlearningjobs"): "FederatedLearningJob",
    ("sedna.io/v1alpha1", "incrementallearningjobs"): "IncrementalLearningJob",
    ("sedna.io/v1alpha1", "lifelonglearningjobs"): "LifelongLearningJob",
}


class HookError(AssertionError):
    """The hook answered something Metacontroller would reject."""


class Transport:
    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        raise NotImplementedError


class FlaskTransport(Transport):
    def __init__(self, app: Any):
        self.client = app.test_client()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        response = self.client.post(path, data=body, content_type="application/json")
        return response.status_code, response.get_data()


class HTTPTransport(Transport):
    """A real HTTP client to a hook server on a loopback address, with a timeout."""

    def __init__(self, base_url: str, timeout: float = 10.0, headers: dict[str, str] | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = headers or {}

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        req = urllib.request.Request(
            self.base_url + path, data=body, method="POST",
            headers={"Content-Type": "application/json", **self.headers},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


@dataclass
class Cluster:
    """Objects by (child key, namespace, name); DeciceJobs by (namespace, name)."""

    clock: Clock = field(default_factory=Clock)
    objects: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    jobs: dict[tuple[str, str], dict] = field(default_factory=dict)
    _uids: Iterable[int] = field(default_factory=lambda: itertools.count(1))
    _versions: Iterable[int] = field(default_factory=lambda: itertools.count(1))

    def uid(self) -> str:
        return f"00000000-0000-0000-0000-{next(self._uids):012d}"

    def version(self) -> str:
        return str(next(self._versions))

    def create_job(self, manifest: dict, namespace: str | None = None) -> dict:
        job = copy.deepcopy(manifest)
        meta = job.setdefault("metadata", {})
        meta.setdefault("namespace", namespace or "default")
        meta.update(uid=self.uid(), generation=1, resourceVersion=self.version(),
                    creationTimestamp=self.clock.stamp())
        self.jobs[(meta["namespace"], meta["name"])] = job
        return job

    def update_job_spec(self, job: dict, spec: dict) -> None:
        job["spec"] = copy.deepcopy(spec)
        job["metadata"]["generation"] += 1
        job["metadata"]["resourceVersion"] = self.version()

    def children_of(self, job: dict, key: str | None = None) -> list[dict]:
        uid = job["metadata"]["uid"]
        return [
            obj for (k, _, _), obj in sorted(self.objects.items())
            if (key is None or k == key) and obj["metadata"].get("labels", {}).get("controller-uid") == uid
        ]

    def pods(self, job: dict) -> list[dict]:
        return self.children_of(job, "Pod.v1")

    def pod(self, job: dict, name: str) -> dict:
        return self.objects[("Pod.v1", job["metadata"]["namespace"], name)]

    def create_child(self, parent: dict, desired: dict) -> dict:
        obj = copy.deepcopy(desired)
        meta = obj["metadata"]
        meta.update(uid=self.uid(), resourceVersion=self.version(), creationTimestamp=self.clock.stamp(),
                    generation=1)
        meta["ownerReferences"] = [{
            "apiVersion": parent["apiVersion"], "kind": parent["kind"], "name": parent["metadata"]["name"],
            "uid": parent["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
        }]
        if obj["kind"] == "Pod":
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif obj["kind"] == "PersistentVolumeClaim":
            obj["status"] = {"phase": "Pending"}
        self.objects[(child_key(obj), meta["namespace"], meta["name"])] = obj
        return obj

    def delete(self, key: str, namespace: str, name: str) -> None:
        self.objects.pop((key, namespace, name), None)


class Controller:
    """Metacontroller's CompositeController for DeciceJobs, against a hook over ``transport``."""

    def __init__(self, cluster: Cluster, transport: Transport, version: str = "v2",
                 controller: dict | None = None, validate: Callable[[dict], list[str]] | None = None):
        self.cluster = cluster
        self.transport = transport
        self.version = version
        self.controller = controller or load_controller()
        self.validate = validate
        self.last_request: bytes = b""
        self.last_response: dict = {}
        self.calls = 0

    @property
    def child_rules(self) -> list[dict]:
        return self.controller["spec"]["childResources"]

    def managed_keys(self) -> dict[str, dict]:
        rules = {}
        for rule in self.child_rules:
            api_version, resource = resource_key(rule)
            rules[f"{KIND_OF_RESOURCE[(api_version, resource)]}.{api_version}"] = rule
        return rules

    def request(self, job: dict, finalizing: bool = False) -> dict:
        namespace = job["metadata"]["namespace"]
        children: dict[str, dict] = {}
        for key in self.managed_keys():
            group = {}
            for obj in self.cluster.children_of(job, key):
                name = obj["metadata"]["name"]
                group[f"{namespace}/{name}" if self.version == "v2" else name] = copy.deepcopy(obj)
            children[key] = group
        return {"controller": self.controller, "parent": copy.deepcopy(job), "children": children,
                "related": {}, "finalizing": finalizing}

    def call(self, job: dict, finalizing: bool = False) -> dict:
        body = json.dumps(self.request(job, finalizing)).encode()
        self.last_request = body
        status, raw = self.transport.post("/finalize" if finalizing else "/sync", body)
        self.calls += 1
        if status != 200:
            raise HookError(f"hook answered {status}: {raw[:500]!r}")
        response = json.loads(raw)
        unknown = set(response) - RESPONSE_KEYS
        if unknown:
            raise HookError(f"strict unmarshalling rejects unknown response fields {sorted(unknown)}")
        if not isinstance(response.get("children"), list) or not isinstance(response.get("status"), dict):
            raise HookError("response must carry status (object) and children (list)")
        self.last_response = response
        return response

    def sync(self, job: dict) -> dict:
        """One sync: call the hook (or finalize, when the job is being deleted) and apply the result."""
        finalizing = bool(job["metadata"].get("deletionTimestamp"))
        response = self.call(job, finalizing)
        self.apply(job, response["children"])
        job["status"] = response["status"]
        job["metadata"]["resourceVersion"] = self.cluster.version()
        if self.validate is not None and (errors := self.validate(job)):
            raise HookError(f"DeciceJob rejected by its CRD: {errors}")
        if finalizing and response.get("finalized"):
            self.cluster.jobs.pop((job["metadata"]["namespace"], job["metadata"]["name"]), None)
            for obj in self.cluster.children_of(job):
                self.cluster.delete(child_key(obj), obj["metadata"]["namespace"], obj["metadata"]["name"])
        return response

    def apply(self, job: dict, desired: list[dict]) -> None:
        namespace = job["metadata"]["namespace"]
        uid = job["metadata"]["uid"]
        rules = self.managed_keys()
        wanted: dict[tuple[str, str, str], dict] = {}
        for child in desired:
            for key in ("apiVersion", "kind", "metadata"):
                if key not in child:
                    raise HookError(f"desired child without {key}: {str(child)[:200]}")
            child = copy.deepcopy(child)
            meta = child["metadata"]
            meta.setdefault("namespace", namespace)
            if meta["namespace"] != namespace:
                raise HookError(f"child {meta['name']} outside the parent's namespace: {meta['namespace']}")
            key = child_key(child)
            if key not in rules:
                raise HookError(f"child kind {key} is not a child resource of the CompositeController")
            meta.setdefault("labels", {}).setdefault("controller-uid", uid)
            ident = (key, namespace, meta["name"])
            if ident in wanted:
                raise HookError(f"duplicate desired child {ident}")
            wanted[ident] = child
        for obj in self.cluster.children_of(job):
            ident = (child_key(obj), namespace, obj["metadata"]["name"])
            if ident not in wanted:
                self.cluster.delete(*ident)
        for ident, child in wanted.items():
            existing = self.cluster.objects.get(ident)
            if existing is None:
                self.cluster.create_child(job, child)
            elif rules[ident[0]].get("updateStrategy", {}).get("method", "OnDelete") == "InPlace":
                for field_name in ("spec",):
                    if field_name in child:
                        existing[field_name] = child[field_name]
                existing["metadata"]["labels"] = child["metadata"].get("labels", {})

    def delete_job(self, job: dict) -> None:
        job["metadata"]["deletionTimestamp"] = self.cluster.clock.stamp()

    def run_until(self, job: dict, predicate: Callable[[dict], bool], kubelet: Callable[[], Any] | None = None,
                  limit: int = 50) -> dict:
        """Sync (and let ``kubelet`` act between syncs) until ``predicate(job)``; bounded."""
        for _ in range(limit):
            self.sync(job)
            if predicate(job):
                return job
            if kubelet is not None:
                kubelet()
        raise AssertionError(f"not reached after {limit} syncs; status: {json.dumps(job.get('status'))[:2000]}")


class Kubelet:
    """Moves pods through their lifecycle the way the scheduler and kubelet report it."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def _container_statuses(self, pod: dict, state: dict, ready: bool, restarts: int = 0) -> list[dict]:
        return [
            {"name": c["name"], "image": c["image"], "imageID": "", "ready": ready, "restartCount": restarts,
             "started": ready, "state": state}
            for c in pod["spec"]["containers"]
        ]

    @staticmethod
    def _conditions(now: str, scheduled: bool, ready: bool, initialized: bool = True) -> list[dict]:
        value = lambda flag: "True" if flag else "False"  # noqa: E731
        return [
            {"type": "PodScheduled", "status": value(scheduled), "lastTransitionTime": now},
            {"type": "Initialized", "status": value(initialized and scheduled), "lastTransitionTime": now},
            {"type": "ContainersReady", "status": value(ready), "lastTransitionTime": now},
            {"type": "Ready", "status": value(ready), "lastTransitionTime": now},
        ]

    def node_for(self, pod: dict) -> str:
        """Where the scheduler puts the pod: its required host name, or a generic node."""
        try:
            terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            for expr in terms["nodeSelectorTerms"][0]["matchExpressions"]:
                if expr["key"] == "kubernetes.io/hostname":
                    return expr["values"][0]
        except (KeyError, IndexError):
            pass
        return "node-1"

    def schedule(self, pod: dict, node: str | None = None) -> dict:
        pod["spec"]["nodeName"] = node or self.node_for(pod)
        now = self.cluster.clock.stamp()
        pod["status"].update(phase="Pending", conditions=self._conditions(now, True, False), startTime=now,
                             containerStatuses=self._container_statuses(
                                 pod, {"waiting": {"reason": "ContainerCreating"}}, False))
        return pod

    def run(self, pod: dict, ready: bool = True) -> dict:
        if not pod["spec"].get("nodeName"):
            self.schedule(pod)
        now = self.cluster.clock.stamp()
        pod["status"].update(phase="Running", conditions=self._conditions(now, True, ready),
                             containerStatuses=self._container_statuses(pod, {"running": {"startedAt": now}}, ready))
        return pod

    def terminate(self, pod: dict, exit_code: int, reason: str | None = None, message: str = "") -> dict:
        if pod["status"].get("phase") != "Running":
            self.run(pod)
        now = self.cluster.clock.stamp()
        term = {"exitCode": exit_code, "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                "startedAt": pod["status"].get("startTime", now), "finishedAt": now}
        if message:
            term["message"] = message
        pod["status"].update(phase="Succeeded" if exit_code == 0 else "Failed",
                             conditions=self._conditions(now, True, False),
                             containerStatuses=self._container_statuses(pod, {"terminated": term}, False))
        return pod

    def succeed(self, pod: dict) -> dict:
        return self.terminate(pod, 0)

    def fail(self, pod: dict, exit_code: int = 1, message: str = "") -> dict:
        return self.terminate(pod, exit_code, message=message)

    def evict(self, pod: dict, reason: str = "Evicted", message: str = "The node was low on resource: memory.") -> dict:
        now = self.cluster.clock.stamp()
        pod["status"].update(
            phase="Failed", reason=reason, message=message,
            conditions=self._conditions(now, True, False) + [
                {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                 "lastTransitionTime": now}],
            containerStatuses=self._container_statuses(
                pod, {"terminated": {"exitCode": 137, "reason": "Error", "finishedAt": now}}, False),
        )
        return pod

    def unschedulable(self, pod: dict, message: str = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                      seconds_ago: float = 0) -> dict:
        since = self.cluster.clock.stamp(seconds_ago)
        pod["status"].update(phase="Pending", conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
             "lastTransitionTime": since}])
        return pod

    def waiting(self, pod: dict, reason: str = "ImagePullBackOff",
                message: str = 'Back-off pulling image "registry.invalid/x:1"', seconds_ago: float = 0) -> dict:
        self.schedule(pod)
        pod["status"]["startTime"] = self.cluster.clock.stamp(seconds_ago)
        pod["status"]["containerStatuses"] = self._container_statuses(
            pod, {"waiting": {"reason": reason, "message": message}}, False)
        return pod

    def restart(self, pod: dict, restarts: int) -> dict:
        """An OnFailure/Always container that crashed and was restarted in place."""
        self.run(pod)
        for cs in pod["status"]["containerStatuses"]:
            cs["restartCount"] = restarts
        return pod

    def run_all(self, pods: Iterable[dict], ready: bool = True) -> None:
        for pod in pods:
            if pod["status"].get("phase") == "Pending":
                self.run(pod, ready)

    def finish_all(self, pods: Iterable[dict]) -> None:
        for pod in pods:
            if pod["status"].get("phase") in ("Pending", "Running") and pod["spec"]["restartPolicy"] != "Always":
                self.succeed(pod)
