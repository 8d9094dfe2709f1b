"""hooks.wire: requests decoded with observed Pods cut down answer exactly as requests decoded in full."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

import orjson
import pytest

from benchmarks.workload import sync_request
from hooks import wire
from hooks.runtimes.kubernetes import ObservedPod, pod_view
from hooks.sync import handle
from tests.conftest import job_manifest, task
from tests.driver import Controller, FlaskTransport, Transport
from tests.helpers import condition

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


def answer_bytes(body: bytes, finalizing: bool = False) -> tuple[bytes, bytes]:
    """The answer to ``body`` decoded by ``hooks.wire`` and decoded in full, both encoded."""
    cut = handle(wire.decode(body), NOW, finalizing, source=body)
    full = handle(orjson.loads(body), NOW, finalizing)
    return orjson.dumps(cut), orjson.dumps(full)


class Compared(Transport):
    """The app over its test client, every request also answered from the fully decoded body: the
    answers must be the same bytes, and every observed pod must give the same view."""

    def __init__(self, app, clock):
        self.inner = FlaskTransport(app)
        self.clock = clock
        self.requests = 0

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        status, raw = self.inner.post(path, body)
        assert status == 200, raw
        full = orjson.loads(body)
        assert raw == orjson.dumps(handle(full, self.clock(), path == "/finalize"))
        cut = wire.decode(body)
        for key, pod in full["children"]["Pod.v1"].items():
            assert pod_view(cut["children"]["Pod.v1"][key]) == pod_view(pod), key
        self.requests += 1
        return status, raw


def test_a_job_through_every_pod_state_gets_the_same_answers(app, clock, cluster, kubelet, submit):
    transport = Compared(app, clock)
    controller = Controller(cluster, transport)
    job = submit(job_manifest(tasks=[
        task("batch", replicas=6),
        task("svc", replicas=2, restartPolicy="OnFailure"),
    ], backoffLimit=20))
    controller.sync(job)
    batch = [cluster.pod(job, f"demo-batch-{i}") for i in range(6)]
    svc = [cluster.pod(job, f"demo-svc-{i}") for i in range(2)]
    kubelet.unschedulable(batch[0], seconds_ago=30)
    kubelet.waiting(batch[1], seconds_ago=30)
    kubelet.run(batch[2], ready=False)
    kubelet.fail(batch[3], exit_code=3, message="out of data\n")
    kubelet.evict(batch[4])
    kubelet.succeed(batch[5])
    kubelet.restart(svc[0], restarts=2)
    kubelet.schedule(svc[1])
    svc[1]["metadata"]["deletionTimestamp"] = clock.stamp()
    controller.sync(job)
    clock.advance(60)
    controller.sync(job)
    assert {p["metadata"]["name"] for p in cluster.pods(job)} >= {"demo-batch-3-1", "demo-batch-4-1"}

    job["spec"]["tasks"][0]["image"] = ""  # invalid: the answer keeps every observed pod as it is
    controller.sync(job)
    assert condition(job, "Progressing")["reason"] == "InvalidSpec"
    job["metadata"]["deletionTimestamp"] = clock.stamp()
    controller.sync(job)
    assert transport.requests == 5


def test_observed_pods_keep_only_the_fields_the_hook_reads():
    body = orjson.dumps(sync_request(3))
    full, cut = orjson.loads(body), wire.decode(body)
    assert cut["parent"] == full["parent"]
    for key, pod in cut["children"]["Pod.v1"].items():
        assert set(pod) <= set(ObservedPod.__annotations__)
        assert set(pod["metadata"]) == {"name", "namespace", "labels", "creationTimestamp"}
        assert pod["spec"] == {"nodeName": full["children"]["Pod.v1"][key]["spec"]["nodeName"]}
        assert [set(c) for c in pod["status"]["containerStatuses"]] == [{"restartCount", "state"}]
        assert pod_view(pod) == pod_view(full["children"]["Pod.v1"][key])
    assert answer_bytes(body)[0] == answer_bytes(body)[1]


CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra", "namespace": "bench"},
              "data": {"k": "v"}}


def test_children_of_a_kind_the_hooks_never_create_change_no_answer():
    request = sync_request(2)
    request["children"]["ConfigMap.v1"] = {"bench/extra": CONFIG_MAP}
    body = orjson.dumps(request)
    assert "ConfigMap.v1" not in wire.decode(body)["children"]
    cut, full = answer_bytes(body)
    assert cut == full


@pytest.mark.parametrize("finalizing", [False, True])
def test_a_refusal_echoes_observed_children_in_full(finalizing):
    request = sync_request(2)
    request["parent"]["spec"]["tasks"][0]["image"] = ""
    for pod in request["children"]["Pod.v1"].values():
        pod["metadata"].pop("annotations", None)
    request["children"]["ConfigMap.v1"] = {"bench/extra": CONFIG_MAP}
    body = orjson.dumps(request)
    cut, full = answer_bytes(body, finalizing)
    assert cut == full
    answer = orjson.loads(cut)
    assert [c for c in answer["children"] if c["kind"] == "ConfigMap"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra", "namespace": "bench"}}]
    kept = [c for c in answer["children"] if c["kind"] == "Pod"]
    if finalizing:
        assert kept == [] and answer["finalized"] is False, "workloads go; the job waits for them"
    else:
        observed = {p["metadata"]["name"]: p for p in request["children"]["Pod.v1"].values()}
        assert [c["spec"] for c in kept] == [observed[c["metadata"]["name"]]["spec"] for c in kept]
        assert len(kept) == 2 and all(len(c["spec"]["containers"]) == 1 for c in kept)


@pytest.mark.parametrize("change", [
    lambda pod: pod.update(status="Running"),
    lambda pod: pod.update(spec="default"),
    lambda pod: pod["status"].update(containerStatuses=["not an object"]),
    lambda pod: pod.update(metadata=[1]),
])
def test_a_pod_the_typed_decoder_refuses_is_decoded_in_full(change):
    request = sync_request(2)
    change(next(iter(request["children"]["Pod.v1"].values())))
    body = orjson.dumps(request)
    assert wire.decode(body) == request


def test_invalid_json_and_nesting_too_deep_for_either_decoder():
    with pytest.raises(orjson.JSONDecodeError):
        wire.decode(b'{"parent": ')
    with pytest.raises(orjson.JSONDecodeError):
        wire.decode(b"[" * 100_000 + b"]" * 100_000)


def test_children_other_than_pods_are_decoded_in_full():
    request = sync_request(1)
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "bench-data", "namespace": "bench", "managedFields": [{"manager": "x"}]},
             "spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}}
    request["children"]["PersistentVolumeClaim.v1"] = {"bench/bench-data": copy.deepcopy(claim)}
    assert wire.decode(orjson.dumps(request))["children"]["PersistentVolumeClaim.v1"] == {"bench/bench-data": claim}
