"""hooks.memo: what the hook server remembers changes no answer, and stays within its bound."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime, timezone

import orjson

from benchmarks.workload import sync_request
from hooks.memo import Memo
from hooks.model import parse_job
from hooks.runtimes import kubernetes
from hooks.sync import handle
from tests.conftest import job_manifest, task

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


def built(memo: Memo, job, attempts, calls: list[int]) -> list[dict]:
    def build() -> list[dict]:
        calls.append(1)
        return kubernetes.task_pods(job, job.spec.tasks[0], attempts)

    return memo.task_pods(job, job.spec.tasks[0], (), attempts, build)


def test_the_same_job_and_attempts_get_the_remembered_pods():
    memo, calls = Memo(), []
    job = parse_job(job_manifest(tasks=[task("main", replicas=2)]))
    first = built(memo, job, ((0,), (0,)), calls)
    assert built(memo, job, ((0,), (0,)), calls) is first and len(calls) == 1
    retried = built(memo, job, ((0,), (0, 1)), calls)
    assert len(calls) == 2 and [p["metadata"]["name"] for p in retried] == ["demo-main-0", "demo-main-1", "demo-main-1-1"]
    again = parse_job(job_manifest(tasks=[task("main", replicas=2)]))
    assert built(memo, again, ((0,), (0, 1)), calls) == retried and len(calls) == 3, "another parse is another job"


def test_a_changed_task_is_built_again():
    memo, calls = Memo(), []
    job = parse_job(job_manifest(tasks=[task("main", replicas=1)]))
    edge = replace(job.spec.tasks[0], labels={"zone": "edge"})
    memo.task_pods(job, job.spec.tasks[0], (), ((0,),), lambda: calls.append(1) or [{}])
    memo.task_pods(job, edge, (), ((0,),), lambda: calls.append(1) or [{}])
    memo.task_pods(job, edge, ({"key": "edge"},), ((0,),), lambda: calls.append(1) or [{}])
    assert len(calls) == 3


def test_remembered_pods_stay_within_the_bound():
    memo = Memo(pods=5)
    jobs = [parse_job(job_manifest(name=f"job{i}", tasks=[task("main", replicas=2)])) for i in range(4)]
    for job in jobs:
        built(memo, job, ((0,), (0,)), [])
    calls: list[int] = []
    built(memo, jobs[0], ((0,), (0,)), calls)
    assert calls == [1], "the least recently used task was dropped"
    built(memo, jobs[3], ((0,), (0,)), calls)
    assert calls == [1], "the most recent ones are kept"
    big = parse_job(job_manifest(name="big", tasks=[task("main", replicas=6)]))
    built(memo, big, ((0,),) * 6, calls)
    built(memo, big, ((0,),) * 6, calls)
    assert calls == [1, 1, 1], "a task over the bound is never kept"
    assert built(memo, jobs[3], ((0,), (0,)), calls) and calls == [1, 1, 1]


def test_remembered_tasks_stay_within_their_bound():
    memo = Memo(tasks=2)
    jobs = [parse_job(job_manifest(name=f"job{i}")) for i in range(3)]
    for job in jobs:
        built(memo, job, ((0,),), [])
    calls: list[int] = []
    built(memo, jobs[2], ((0,),), calls)
    built(memo, jobs[0], ((0,),), calls)
    assert calls == [1]


def test_no_pods_are_kept_with_a_bound_of_zero():
    memo, calls = Memo(pods=0), []
    job = parse_job(job_manifest())
    built(memo, job, ((0,),), calls)
    built(memo, job, ((0,),), calls)
    assert calls == [1, 1]


def test_answers_are_the_same_bytes_with_and_without_a_memo():
    memo = Memo()
    request = sync_request(20)
    for _ in range(2):
        assert orjson.dumps(handle(copy.deepcopy(request), NOW, memo=memo)) == orjson.dumps(handle(request, NOW))
    pods = request["children"]["Pod.v1"]
    pods[next(iter(pods))]["status"].update(phase="Failed", reason="Evicted")
    assert orjson.dumps(handle(copy.deepcopy(request), NOW, memo=memo)) == orjson.dumps(handle(request, NOW))
