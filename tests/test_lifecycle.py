"""Jobs walked end to end through the Metacontroller protocol driver."""

from __future__ import annotations

import json

from tests.conftest import job_manifest, task
from tests.helpers import condition, names, phase, task_status


def test_single_task_job_runs_to_success(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[task("main", replicas=2)]))
    controller.sync(job)
    pods = cluster.pods(job)
    assert names(pods) == ["demo-main-0", "demo-main-1"]
    assert phase(job) == "Pending"
    assert job["status"]["startTime"]
    assert task_status(job, "main")["phase"] == "Pending"

    kubelet.run_all(pods)
    controller.sync(job)
    assert phase(job) == "Running"
    status = task_status(job, "main")
    assert (status["running"], status["ready"], status["nodes"]) == (2, 2, ["node-1"])

    kubelet.finish_all(pods)
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert job["status"]["completionTime"]
    assert job["status"]["progress"] == "1/1"
    assert condition(job, "Complete")["status"] == "True"
    assert condition(job, "Failed")["status"] == "False"
    assert condition(job, "Progressing")["reason"] == "JobFinished"
    assert names(cluster.pods(job)) == ["demo-main-0", "demo-main-1"], "finished pods stay for their logs"


def test_children_service_and_volumes(controller, cluster, submit):
    job = submit(job_manifest(
        tasks=[task("main", ports=[{"containerPort": 8080, "name": "http"}],
                    volumeMounts=[{"volume": "data", "mountPath": "/data"}, {"volume": "shared", "mountPath": "/s"}])],
        volumes=[{"name": "data", "size": "1Gi"}, {"name": "shared", "existingClaim": "team-share"}],
    ))
    controller.sync(job)
    service = cluster.children_of(job, "Service.v1")[0]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]
    claims = cluster.children_of(job, "PersistentVolumeClaim.v1")
    assert names(claims) == ["demo-data"], "an existing claim is mounted, never created"
    pod = cluster.pods(job)[0]
    assert pod["spec"]["hostname"] == "main-0" and pod["spec"]["subdomain"] == "demo"
    assert {v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]} == {"demo-data", "team-share"}
    assert job["status"]["volumes"] == [
        {"name": "data", "claimName": "demo-data", "phase": "Pending"},
        {"name": "shared", "claimName": "team-share", "existingClaim": True},
    ]
    claims[0]["status"]["phase"] = "Bound"
    controller.sync(job)
    assert job["status"]["volumes"][0]["phase"] == "Bound"


def test_dependency_chain_is_honoured(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[
        task("prepare"),
        task("train", replicas=2, dependsOn=["prepare"]),
        task("evaluate", dependsOn=["train"]),
    ]))
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-prepare-0"]
    assert [task_status(job, t)["phase"] for t in ("prepare", "train", "evaluate")] == ["Pending", "Waiting", "Waiting"]

    kubelet.run(cluster.pod(job, "demo-prepare-0"))
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-prepare-0"], "train waits until prepare succeeded"

    kubelet.succeed(cluster.pod(job, "demo-prepare-0"))
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-prepare-0", "demo-train-0", "demo-train-1"]
    assert task_status(job, "evaluate")["phase"] == "Waiting"

    kubelet.succeed(cluster.pod(job, "demo-train-0"))
    controller.sync(job)
    assert "demo-evaluate-0" not in names(cluster.pods(job)), "all replicas of train must succeed"

    kubelet.succeed(cluster.pod(job, "demo-train-1"))
    controller.sync(job)
    kubelet.succeed(cluster.pod(job, "demo-evaluate-0"))
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert [task_status(job, t)["phase"] for t in ("prepare", "train", "evaluate")] == ["Succeeded"] * 3


def test_service_dependency_needs_running_and_ready(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[
        task("db", restartPolicy="Always", replicas=2),
        task("client", dependsOn=["db"]),
    ]))
    controller.sync(job)
    db0, db1 = cluster.pods(job)
    kubelet.run(db0)
    kubelet.run(db1, ready=False)
    controller.sync(job)
    assert task_status(job, "client")["phase"] == "Waiting", "one db replica is not ready"

    kubelet.run(db1)
    controller.sync(job)
    assert "demo-client-0" in names(cluster.pods(job))
    kubelet.succeed(cluster.pod(job, "demo-client-0"))
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert names(cluster.pods(job)) == ["demo-client-0"], "service pods stop once the batch work is done"
    assert task_status(job, "db")["phase"] == "Succeeded"


def test_job_of_only_services_keeps_running(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[task("web", restartPolicy="Always")]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    for _ in range(3):
        controller.sync(job)
    assert phase(job) == "Running"
    assert condition(job, "Progressing")["status"] == "True"


def test_placement_pins_each_replica_by_affinity(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[task("main", replicas=3, placement={
        "nodes": ["edge-a", "edge-b"], "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]})]))
    controller.sync(job)
    pods = cluster.pods(job)
    pinned = [
        p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]
        for p in pods
    ]
    assert pinned == ["edge-a", "edge-b", "edge-a"]
    assert all("nodeName" not in p["spec"] for p in cluster.pods(job)), "the scheduler still places the pod"
    assert pods[0]["spec"]["nodeSelector"] == {"disk": "ssd"}
    kubelet.run_all(pods)
    controller.sync(job)
    assert task_status(job, "main")["nodes"] == ["edge-a", "edge-b"]


def test_pod_environment_and_resources(controller, cluster, submit):
    job = submit(job_manifest(tasks=[
        task("ps"),
        task("worker", replicas=2, resources={"cpu": "2", "memory": "4Gi", "gpu": 1},
             env=[{"name": "RANK", "value": "$(DECICE_TASK_INDEX)"}], labels={"team": "ml"},
             annotations={"note": "x"}),
    ]))
    controller.sync(job)
    worker = cluster.pod(job, "demo-worker-1")
    container = worker["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DECICE_JOB_NAME"] == "demo"
    assert env["DECICE_TASK_NAME"] == "worker"
    assert env["DECICE_TASK_INDEX"] == "1"
    assert env["DECICE_TASKS"] == "ps:1,worker:2"
    assert env["DECICE_SUBDOMAIN"] == "demo"
    assert [e["name"] for e in container["env"]][-1] == "RANK", "user env comes last so it can reference ours"
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
    }
    labels = worker["metadata"]["labels"]
    assert labels["team"] == "ml" and labels["dev.decice.com/task-index"] == "1"
    assert labels["controller-uid"] == job["metadata"]["uid"]
    assert worker["metadata"]["annotations"] == {"note": "x"}


def test_same_request_same_bytes(controller, cluster, kubelet, submit, client):
    job = submit(job_manifest(tasks=[task("a", replicas=3), task("b", dependsOn=["a"])]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    controller.sync(job)
    body = controller.last_request
    first = client.post("/sync", data=body, content_type="application/json").get_data()
    second = client.post("/sync", data=body, content_type="application/json").get_data()
    assert first == second
    assert json.loads(first)["status"] == job["status"], "a settled job's status does not change"


def test_settled_status_does_not_move_with_the_clock(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest())
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    settled = json.dumps(job["status"], sort_keys=True)
    clock.advance(3600)
    controller.sync(job)
    assert json.dumps(job["status"], sort_keys=True) == settled


def test_condition_transition_time_moves_only_on_status_change(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest())
    controller.sync(job)
    before = condition(job, "Complete")["lastTransitionTime"]
    clock.advance(60)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    assert condition(job, "Complete")["lastTransitionTime"] == before
    clock.advance(60)
    kubelet.finish_all(cluster.pods(job))
    controller.sync(job)
    assert condition(job, "Complete")["lastTransitionTime"] == clock.stamp()
    assert condition(job, "Complete")["lastTransitionTime"] != before


def test_v1_hooks_are_understood(controller, cluster, kubelet, submit):
    controller.version = "v1"
    job = submit(job_manifest(tasks=[task("main", replicas=2)]))
    controller.sync(job)
    kubelet.finish_all(cluster.pods(job))
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert names(cluster.pods(job)) == ["demo-main-0", "demo-main-1"]


def test_succeeded_is_latched(controller, cluster, kubelet, submit):
    job = submit(job_manifest())
    controller.sync(job)
    kubelet.finish_all(cluster.pods(job))
    controller.sync(job)
    assert phase(job) == "Succeeded"
    kubelet.fail(cluster.pods(job)[0])
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert names(cluster.pods(job)) == ["demo-main-0"], "a finished job starts nothing new"


def test_removing_a_task_from_a_running_job_removes_its_pods(controller, cluster, submit):
    job = submit(job_manifest(tasks=[task("a"), task("b", replicas=2)]))
    controller.sync(job)
    cluster.update_job_spec(job, {"tasks": [task("a"), task("b")]})
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-a-0", "demo-b-0"]
    assert job["status"]["observedGeneration"] == 2
