"""Retries, disruptions, deadlines, stuck pods, suspend and TTL, through the protocol driver.

Time is the cluster clock, shared with the hook: tests move it forward (or
stamp observed objects in the past) instead of sleeping.
"""

from __future__ import annotations

from tests.conftest import job_manifest, task
from tests.helpers import condition, names, phase, task_status


def test_failed_pod_is_kept_and_replaced_after_backoff(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(backoffLimit=3))
    controller.sync(job)
    kubelet.fail(cluster.pod(job, "demo-main-0"), message="boom")
    response = controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-main-0"], "the replacement waits for the back-off delay"
    assert response["resyncAfterSeconds"] == 10
    assert task_status(job, "main")["failed"] == 1
    assert "demo-main-0: exit code 1 (Error): boom" == task_status(job, "main")["message"]

    clock.advance(10)
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-main-0", "demo-main-0-1"], "failed pod stays for its logs"
    assert phase(job) == "Pending"

    kubelet.fail(cluster.pod(job, "demo-main-0-1"))
    response = controller.sync(job)
    assert response["resyncAfterSeconds"] == 20, "the delay doubles"
    clock.advance(20)
    controller.sync(job)
    kubelet.succeed(cluster.pod(job, "demo-main-0-2"))
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert task_status(job, "main")["failed"] == 2


def test_backoff_limit_exceeded_fails_the_job(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(backoffLimit=1, tasks=[task("a"), task("b", replicas=2)]))
    controller.sync(job)
    kubelet.run(cluster.pod(job, "demo-b-0"))
    kubelet.fail(cluster.pod(job, "demo-a-0"))
    controller.sync(job)
    clock.advance(10)
    controller.sync(job)
    kubelet.fail(cluster.pod(job, "demo-a-0-1"))
    response = controller.sync(job)
    assert phase(job) == "Failed"
    failed = condition(job, "Failed")
    assert failed["status"] == "True" and failed["reason"] == "BackoffLimitExceeded"
    assert "resyncAfterSeconds" not in response
    assert names(cluster.pods(job)) == ["demo-a-0", "demo-a-0-1"], "running pods are stopped, failed ones kept"
    assert task_status(job, "a")["phase"] == "Failed"
    clock.advance(600)
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-a-0", "demo-a-0-1"], "no new pods start"
    assert phase(job) == "Failed", "Failed is latched"


def test_disruptions_are_replaced_at_once_and_not_counted(controller, cluster, kubelet, submit):
    job = submit(job_manifest(backoffLimit=0, tasks=[task("main", replicas=3)]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    kubelet.evict(cluster.pod(job, "demo-main-0"))
    kubelet.evict(cluster.pod(job, "demo-main-1"), reason="Preempting", message="preempted")
    pod = kubelet.run(cluster.pod(job, "demo-main-2"))
    pod["status"].update(phase="Failed", reason="NodeLost", message="node gone")
    controller.sync(job)
    assert phase(job) != "Failed"
    status = task_status(job, "main")
    assert (status["failed"], status["disruptions"]) == (0, 3)
    assert {"demo-main-0-1", "demo-main-1-1", "demo-main-2-1"} <= set(names(cluster.pods(job)))


def test_disruption_target_condition_counts_as_disruption(controller, cluster, kubelet, submit):
    job = submit(job_manifest(backoffLimit=0))
    controller.sync(job)
    pod = kubelet.fail(cluster.pod(job, "demo-main-0"))
    pod["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                        "reason": "PreemptionByScheduler", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    controller.sync(job)
    assert task_status(job, "main")["disruptions"] == 1
    assert "demo-main-0-1" in names(cluster.pods(job))


def test_on_failure_restarts_count_against_the_limit(controller, cluster, kubelet, submit):
    job = submit(job_manifest(backoffLimit=2, tasks=[task("main", restartPolicy="OnFailure")]))
    controller.sync(job)
    kubelet.restart(cluster.pod(job, "demo-main-0"), restarts=2)
    controller.sync(job)
    assert phase(job) == "Running" and task_status(job, "main")["failed"] == 2
    kubelet.restart(cluster.pod(job, "demo-main-0"), restarts=3)
    controller.sync(job)
    assert phase(job) == "Failed" and condition(job, "Failed")["reason"] == "BackoffLimitExceeded"
    assert cluster.pods(job) == [], "the crash-looping pod is stopped"


def test_active_deadline(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(activeDeadlineSeconds=100))
    response = controller.sync(job)
    assert response["resyncAfterSeconds"] == 100
    kubelet.run_all(cluster.pods(job))
    clock.advance(60)
    response = controller.sync(job)
    assert response["resyncAfterSeconds"] == 40
    clock.advance(40)
    controller.sync(job)
    assert phase(job) == "Failed" and condition(job, "Failed")["reason"] == "DeadlineExceeded"
    assert cluster.pods(job) == [], "running pods are removed"


def test_stuck_pod_is_reported_at_once_and_fails_after_pending_deadline(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(pendingDeadlineSeconds=300, tasks=[task("main", replicas=2)]))
    controller.sync(job)
    kubelet.run(cluster.pod(job, "demo-main-0"))
    kubelet.waiting(cluster.pod(job, "demo-main-1"), seconds_ago=100)
    response = controller.sync(job)
    progressing = condition(job, "Progressing")
    assert progressing["status"] == "False" and progressing["reason"] == "ImagePullBackOff"
    assert task_status(job, "main")["message"].startswith("demo-main-1: ImagePullBackOff: Back-off pulling")
    assert response["resyncAfterSeconds"] == 200
    assert phase(job) == "Running"

    clock.advance(200)
    controller.sync(job)
    assert phase(job) == "Failed"
    failed = condition(job, "Failed")
    assert failed["reason"] == "ImagePullBackOff" and "demo-main-1" in failed["message"]


def test_unschedulable_pod_is_stuck(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(pendingDeadlineSeconds=60))
    controller.sync(job)
    kubelet.unschedulable(cluster.pod(job, "demo-main-0"), seconds_ago=61)
    controller.sync(job)
    assert phase(job) == "Failed"
    assert condition(job, "Failed")["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in job["status"]["message"]


def test_stuck_without_deadline_only_reports(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest())
    controller.sync(job)
    kubelet.waiting(cluster.pod(job, "demo-main-0"), reason="CreateContainerConfigError",
                    message='secret "creds" not found', seconds_ago=10_000)
    response = controller.sync(job)
    assert phase(job) == "Pending"
    assert condition(job, "Progressing")["reason"] == "CreateContainerConfigError"
    assert "resyncAfterSeconds" not in response
    kubelet.run(cluster.pod(job, "demo-main-0"))
    controller.sync(job)
    assert condition(job, "Progressing")["status"] == "True"


def test_suspend_and_resume(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(backoffLimit=5, tasks=[task("main", replicas=2)],
                              volumes=[{"name": "data", "size": "1Gi"}]))
    controller.sync(job)
    kubelet.fail(cluster.pod(job, "demo-main-0"))
    kubelet.run(cluster.pod(job, "demo-main-1"))
    controller.sync(job)
    spec = dict(job["spec"], suspend=True)
    cluster.update_job_spec(job, spec)
    controller.sync(job)
    assert phase(job) == "Suspended"
    assert condition(job, "Suspended")["status"] == "True"
    assert names(cluster.pods(job)) == ["demo-main-0"], "active pods removed, the failed one kept"
    assert names(cluster.children_of(job, "PersistentVolumeClaim.v1")) == ["demo-data"]
    assert "startTime" not in job["status"]

    clock.advance(3600)
    cluster.update_job_spec(job, dict(spec, suspend=False))
    controller.sync(job)
    assert phase(job) == "Pending"
    assert condition(job, "Suspended")["status"] == "False"
    assert job["status"]["startTime"] == clock.stamp(), "the deadline clock restarts on resume"
    assert sorted(names(cluster.pods(job))) == ["demo-main-0", "demo-main-0-1", "demo-main-1"]
    assert task_status(job, "main")["failed"] == 1, "counted failures are kept"


def test_ttl_removes_pods_but_keeps_volumes(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(ttlSecondsAfterFinished=120, volumes=[{"name": "data", "size": "1Gi"}],
                              tasks=[task("main", volumeMounts=[{"volume": "data", "mountPath": "/d"}])]))
    controller.sync(job)
    kubelet.finish_all(cluster.pods(job))
    response = controller.sync(job)
    assert phase(job) == "Succeeded"
    assert response["resyncAfterSeconds"] == 120
    clock.advance(120)
    controller.sync(job)
    assert cluster.pods(job) == []
    assert names(cluster.children_of(job, "PersistentVolumeClaim.v1")) == ["demo-data"]
    assert phase(job) == "Succeeded"
    assert task_status(job, "main")["phase"] == "Succeeded" and task_status(job, "main")["succeeded"] == 1
    assert job["status"]["progress"] == "1/1", "history does not fade when the pods go"


def test_pod_deleted_by_someone_else_is_recreated(controller, cluster, kubelet, submit):
    job = submit(job_manifest())
    controller.sync(job)
    kubelet.run(cluster.pod(job, "demo-main-0"))
    cluster.delete("Pod.v1", "team-a", "demo-main-0")
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-main-0"]
    assert task_status(job, "main")["failed"] == 0
