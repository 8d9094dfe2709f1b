"""End to end: a DECICE workflow is translated, submitted to the API-server stand-in over HTTP,
reconciled by the Metacontroller protocol driver through the hooks, its pods run and finish
(the driver's Kubelet), and the framework learns through ``wait`` and ``task_statuses``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from glue import DeciceJobClient, NotFound, task_statuses, translate
from tests.apiserver import APIServer, kubeconfig, standin  # noqa: F401 (fixtures)
from tests.driver import ROOT, Cluster, Controller, Kubelet
from tests.helpers import names

FINALIZER = "metacontroller.io/compositecontroller-decicejob-controller"


def reconcile(standin: APIServer, controller: Controller, namespace: str, name: str) -> dict | None:
    """One Metacontroller sync of the job stored in the stand-in: add its finalizer, call the
    hooks, write the status back, and release the finalizer once the finalize hook is done."""
    store = standin.store
    job = store.get(namespace, name)
    deleting = bool(job["metadata"].get("deletionTimestamp"))
    if not deleting and FINALIZER not in job["metadata"].get("finalizers", []):
        job = store.patch(namespace, name, {"metadata": {"finalizers": [FINALIZER]}})
    response = controller.sync(job)
    store.update_status(namespace, name, job["status"])
    if deleting and response.get("finalized"):
        store.patch(namespace, name, {"metadata": {"finalizers": None}})
        return None
    return store.get(namespace, name)


@pytest.fixture
def example() -> tuple[dict, dict]:
    workflow = yaml.safe_load((ROOT / "examples" / "workflow.yaml").read_text())
    schedule = yaml.safe_load((ROOT / "examples" / "schedule.yaml").read_text())
    return workflow, schedule


def test_workflow_runs_to_success(standin, kubeconfig: Path, controller: Controller, cluster: Cluster,
                                  kubelet: Kubelet, example):
    workflow, schedule = example
    client = DeciceJobClient(kubeconfig=str(kubeconfig))
    manifest = translate(workflow, schedule, namespace=client.namespace)
    name = manifest["metadata"]["name"]
    assert client.submit(manifest).created

    finished: list[dict] = []
    waiter = threading.Thread(target=lambda: finished.append(client.wait(name, timeout=60)), daemon=True)
    waiter.start()
    standin.wait_for(lambda r: r.query.get("watch") == "true")
    for _ in range(20):
        job = reconcile(standin, controller, "team-a", name)
        if job["status"]["phase"] == "Succeeded":
            break
        kubelet.run_all(cluster.pods(job))
        kubelet.finish_all(cluster.pods(job))
    waiter.join(timeout=30)
    assert finished and finished[0]["status"]["phase"] == "Succeeded"

    payload = task_statuses(finished[0])
    assert payload["workflow_id"] == workflow["id"]
    assert payload["statuses"] == [{"task_id": t["id"], "status": "SUCCEEDED", "detail": None}
                                   for t in workflow["tasks"]]

    pods = cluster.pods(job)
    train = [p for p in pods if p["metadata"]["labels"]["dev.decice.com/task-name"] == "train-model"]
    assert [p["metadata"]["labels"]["dev.decice.com/task-id"] for p in train] == [workflow["tasks"][2]["id"]]
    assert train[0]["spec"]["nodeName"] == "gpu-node-a", "the scheduler's placement was honoured"
    assert names(cluster.children_of(job, "PersistentVolumeClaim.v1")) == [f"{name}-work"]
    assert all(p["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] == "/decice/work" for p in pods)


def test_deleting_a_running_workflow_cancels_it(standin, kubeconfig: Path, controller: Controller,
                                                cluster: Cluster, kubelet: Kubelet, example):
    workflow, schedule = example
    client = DeciceJobClient(kubeconfig=str(kubeconfig))
    name = client.submit(translate(workflow, schedule, namespace="team-a")).job["metadata"]["name"]
    job = reconcile(standin, controller, "team-a", name)
    kubelet.run_all(cluster.pods(job))
    job = reconcile(standin, controller, "team-a", name)

    client.delete(name)
    deleting = client.get(name)
    assert [s["status"] for s in task_statuses(deleting)["statuses"]] == ["CANCELLED"] * 4

    failed: list[Exception] = []

    def wait() -> None:
        try:
            client.wait(name, timeout=60)
        except NotFound as exc:
            failed.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    standin.wait_for(lambda r: r.query.get("watch") == "true")
    for _ in range(5):
        if reconcile(standin, controller, "team-a", name) is None:
            break
    waiter.join(timeout=30)
    assert failed and "deleted while waiting" in str(failed[0])
    assert cluster.pods(deleting) == []
