"""Pure functions of the kubernetes runtime."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from hooks.model import parse_job
from hooks.runtimes.base import Plan
from hooks.runtimes.kubernetes import pod_view, replacement_due, retry_delay, slot_attempts
from tests.conftest import job_manifest, task

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
LABELS = {"dev.decice.com/task-name": "main", "dev.decice.com/task-index": "0", "dev.decice.com/attempt": "0"}


def pod(phase: str = "Running", attempt: int = 0, finished: datetime | None = None, **status) -> dict:
    obj = {"metadata": {"name": f"demo-main-0-{attempt}", "labels": {**LABELS, "dev.decice.com/attempt": str(attempt)},
                        "creationTimestamp": "2026-06-01T11:00:00Z"},
           "spec": {"nodeName": "n1"}, "status": {"phase": phase, **status}}
    if finished:
        obj["status"]["containerStatuses"] = [{"name": "main", "restartCount": 0, "state": {"terminated": {
            "exitCode": 1 if phase == "Failed" else 0, "finishedAt": finished.strftime("%Y-%m-%dT%H:%M:%SZ")}}}]
    return obj


@pytest.mark.parametrize("obj", [
    None, 1, "x", [], {}, {"metadata": None}, {"metadata": {"labels": "x"}},
    {"metadata": {"name": "p", "labels": {"dev.decice.com/task-name": "main"}}},
    {"metadata": {"name": "p", "labels": {**LABELS, "dev.decice.com/task-index": "-1"}}},
    {"metadata": {"name": 5, "labels": LABELS}},
])
def test_pods_without_our_labels_are_ignored(obj):
    assert pod_view(obj) is None


@pytest.mark.parametrize("status", [None, [], {"phase": 3}, {"phase": "Weird", "conditions": "x"},
                                    {"containerStatuses": [None, 1, {"state": []}]}, {"conditions": [None, {}]}])
def test_malformed_status_never_raises(status):
    obj = {"metadata": {"name": "p", "labels": LABELS}, "status": status}
    view = pod_view(obj)
    assert view is not None and view.phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def test_terminating_pod_is_not_counted_as_running_normally():
    obj = pod("Running")
    obj["metadata"]["deletionTimestamp"] = "2026-06-01T11:59:00Z"
    assert pod_view(obj).phase == "Unknown"


def test_retry_delay_doubles_and_caps():
    assert [retry_delay(n).total_seconds() for n in (1, 2, 3, 4, 10)] == [10, 20, 40, 80, 360]


def test_replacement_due_from_finish_time():
    job = parse_job(job_manifest())
    main = job.spec.tasks[0]
    failed = pod_view(pod("Failed", 0, NOW - timedelta(seconds=3)))
    assert replacement_due(main, [failed]) == NOW + timedelta(seconds=7)
    running = pod_view(pod("Running", 1))
    assert replacement_due(main, [failed, running]) is None


def test_slot_attempts_follow_the_plan():
    job = parse_job(job_manifest())
    main = job.spec.tasks[0]
    failed = pod_view(pod("Failed", 0, NOW - timedelta(seconds=30)))
    active = Plan(start=frozenset({"main"}), keep_active=True, keep_finished=True)
    assert slot_attempts(main, [], active, NOW) == [0]
    assert slot_attempts(main, [failed], active, NOW) == [0, 1]
    stopped = Plan(start=frozenset(), keep_active=False, keep_finished=True)
    assert slot_attempts(main, [failed, pod_view(pod("Running", 1))], stopped, NOW) == [0]
    gone = Plan(start=frozenset(), keep_active=False, keep_finished=False)
    assert slot_attempts(main, [failed], gone, NOW) == []


def test_service_pod_that_exited_is_replaced_at_once():
    job = parse_job(job_manifest(tasks=[task("web", restartPolicy="Always")]))
    web = job.spec.tasks[0]
    done = pod_view(pod("Succeeded", 0, NOW - timedelta(seconds=1)))
    assert replacement_due(web, [done]) == NOW - timedelta(seconds=1)
