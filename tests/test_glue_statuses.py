"""``glue.task_statuses``: the status the hooks write, as the DECICE framework's update payload.

The statuses come from the real hooks, driven through the Metacontroller protocol driver."""

from __future__ import annotations

import copy

import pytest

from glue import InvalidJob, task_statuses, translate
from glue.statuses import ttl_expired
from hooks.timeutil import parse_time
from tests.test_glue_translate import WORKFLOW_ID_VALUE, uid, wf_task, workflow


def states(job: dict) -> dict[str, tuple[str, str | None]]:
    payload = task_statuses(job)
    assert payload["workflow_id"] == WORKFLOW_ID_VALUE
    return {s["task_id"]: (s["status"], s["detail"]) for s in payload["statuses"]}


def only_states(job: dict) -> list[str]:
    return [state for state, _ in states(job).values()]


@pytest.fixture
def pipeline(submit):
    """prepare → train (2 replicas) → report, submitted to the driver's cluster."""
    return submit(translate(workflow(
        wf_task(1, "prepare"),
        wf_task(2, "train", replicas=2, dependencies=[uid(1)]),
        wf_task(3, "report", dependencies=[uid(2)]),
    )))


def test_a_job_not_seen_by_the_hooks_yet_is_pending(pipeline):
    assert task_statuses(pipeline) == {"workflow_id": WORKFLOW_ID_VALUE, "statuses": [
        {"task_id": uid(n), "status": "PENDING", "detail": None} for n in (1, 2, 3)]}


def test_statuses_follow_the_job(pipeline, controller, cluster, kubelet):
    job = pipeline
    controller.sync(job)
    assert states(job) == {uid(1): ("PENDING", None), uid(2): ("WAITING", "waiting for prepare"),
                           uid(3): ("WAITING", "waiting for train")}
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    assert only_states(job) == ["RUNNING", "WAITING", "WAITING"]
    kubelet.finish_all(cluster.pods(job))
    controller.sync(job)
    assert only_states(job) == ["SUCCEEDED", "PENDING", "WAITING"]
    controller.run_until(job, lambda j: j["status"]["phase"] == "Succeeded",
                         kubelet=lambda: kubelet.finish_all(cluster.pods(job)))
    assert states(job) == {uid(n): ("SUCCEEDED", None) for n in (1, 2, 3)}


def test_a_stuck_task_says_why(pipeline, controller, cluster, kubelet):
    controller.sync(pipeline)
    kubelet.waiting(cluster.pods(pipeline)[0], "ImagePullBackOff", 'Back-off pulling image "registry.example/t1:1"')
    controller.sync(pipeline)
    state, detail = states(pipeline)[uid(1)]
    assert state == "PENDING" and "ImagePullBackOff" in detail and "registry.example/t1:1" in detail


def test_a_failed_job_fails_its_task_and_cancels_the_rest(submit, controller, cluster, kubelet):
    job = submit(translate(workflow(wf_task(1, "prepare"), wf_task(2, "train", dependencies=[uid(1)]))))
    job["spec"]["backoffLimit"] = 0
    controller.sync(job)
    kubelet.fail(cluster.pods(job)[0], exit_code=3, message="disk full")
    controller.sync(job)
    assert job["status"]["phase"] == "Failed"
    (first, first_detail), (second, second_detail) = states(job).values()
    assert first == "FAILED" and "exit code 3" in first_detail
    assert second == "CANCELLED" and "BackoffLimitExceeded" in second_detail


def test_a_job_being_deleted_cancels_what_has_not_finished(pipeline, controller, cluster, kubelet):
    controller.sync(pipeline)
    kubelet.finish_all(cluster.pods(pipeline))
    controller.sync(pipeline)
    controller.delete_job(pipeline)
    assert states(pipeline) == {uid(1): ("SUCCEEDED", None),
                                uid(2): ("CANCELLED", "the DeciceJob is being deleted"),
                                uid(3): ("CANCELLED", "the DeciceJob is being deleted")}


def test_a_suspended_job_is_pending(pipeline, controller):
    pipeline["spec"]["suspend"] = True
    controller.sync(pipeline)
    assert set(states(pipeline).values()) == {("PENDING", "the DeciceJob is suspended")}


def test_an_invalid_spec_holds_every_task_back(pipeline, controller):
    pipeline["spec"]["tasks"][0]["dependsOn"] = [pipeline["spec"]["tasks"][2]["name"]]
    controller.sync(pipeline)
    details = {detail for _, detail in states(pipeline).values()}
    assert len(details) == 1 and details.pop().startswith("InvalidSpec: spec.tasks: dependency cycle")


def test_a_service_task_is_running_until_the_batch_tasks_are_done(submit, controller, cluster, kubelet):
    job = submit(translate(workflow(wf_task(1, "db", type="deployment"), wf_task(2, "load", dependencies=[uid(1)]))))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    assert only_states(job) == ["RUNNING", "PENDING"]
    controller.run_until(job, lambda j: j["status"]["phase"] == "Succeeded",
                         kubelet=lambda: kubelet.finish_all(cluster.pods(job)))
    assert only_states(job) == ["SUCCEEDED", "SUCCEEDED"]


def test_malformed_status_is_read_defensively(pipeline):
    job = copy.deepcopy(pipeline)
    job["status"] = {"phase": 7, "tasks": ["x", {"name": 3}, {"name": job["spec"]["tasks"][0]["name"], "phase": "Odd"}],
                     "conditions": "nope"}
    assert only_states(job) == ["PENDING", "PENDING", "PENDING"]


def test_a_job_without_decice_ids_is_refused():
    with pytest.raises(InvalidJob) as info:
        task_statuses({"metadata": {"name": "x"}, "spec": {"tasks": [{"name": "a", "image": "i"}]}})
    assert [e.split(":")[0] for e in info.value.errors] == [
        "metadata.annotations[dev.decice.com/workflow-id]", "spec.tasks[0].annotations[dev.decice.com/task-id]"]


@pytest.mark.parametrize(("phase", "ttl", "age", "deleting", "expired"), [
    ("Succeeded", 60, 61, False, True),
    ("Failed", 0, 0, False, True),
    ("Succeeded", 60, 59, False, False),
    ("Running", 60, 600, False, False),
    ("Succeeded", None, 600, False, False),
    ("Succeeded", 60, 600, True, False),
])
def test_ttl_expired(clock, phase, ttl, age, deleting, expired):
    job = {"metadata": {"name": "x"}, "spec": {}, "status": {"phase": phase, "completionTime": clock.stamp(age)}}
    if ttl is not None:
        job["spec"]["ttlSecondsAfterFinished"] = ttl
    if deleting:
        job["metadata"]["deletionTimestamp"] = clock.stamp()
    assert ttl_expired(job, clock()) is expired
    assert parse_time(job["status"]["completionTime"]) is not None
