"""``DeciceJobClient`` through the real ``kubernetes`` client, over HTTP, against the API-server
stand-in on 127.0.0.1.  Time is injected: back-offs are recorded, never slept."""

from __future__ import annotations

import threading
from itertools import islice
from datetime import timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from glue import (
    ApiError,
    ConfigError,
    ConnectionFailed,
    DeciceJobClient,
    InvalidJob,
    NotFound,
    Rejected,
    RetryPolicy,
    SpecConflict,
    WaitTimeout,
)
from tests.apiserver import APIServer, kubeconfig, standin  # noqa: F401 (fixtures)
from tests.conftest import job_manifest, task


class FakeTime:
    """A clock that moves ``tick`` seconds each time it is read, and a sleep that only records."""

    def __init__(self, tick: float = 0.0):
        self.now, self.tick, self.sleeps = 1000.0, tick, []

    def clock(self) -> float:
        self.now += self.tick
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def jobs(kubeconfig: Path, fake_time: FakeTime, clock) -> DeciceJobClient:
    return DeciceJobClient(kubeconfig=str(kubeconfig), retry=RetryPolicy(attempts=4), request_timeout=10,
                           sleep=fake_time.sleep, clock=fake_time.clock, now=clock)


@pytest.fixture
def raw(kubeconfig: Path) -> k8s.CustomObjectsApi:
    """The plain kubernetes client, playing the controller that writes status."""
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return k8s.CustomObjectsApi(k8s.ApiClient(configuration))


def set_status(raw: k8s.CustomObjectsApi, name: str, **status) -> dict:
    return raw.patch_namespaced_custom_object_status("dev.decice.com", "v1alpha1", "team-a", "decicejobs", name,
                                                     {"status": status}, _request_timeout=10)


def labelled(name: str, **labels: str) -> dict:
    manifest = job_manifest(name)
    manifest["metadata"]["labels"] = labels
    return manifest


# --- configuration --------------------------------------------------------------------------


def test_kubeconfig_context_gives_server_credentials_and_namespace(jobs, standin):
    assert jobs.namespace == "team-a"
    jobs.list()
    assert standin.requests[-1].headers["authorization"] == "Bearer test-token"
    assert standin.requests[-1].path == "/apis/dev.decice.com/v1alpha1/namespaces/team-a/decicejobs"


def test_an_injected_api_client_is_used_as_it_is(raw, standin):
    jobs = DeciceJobClient(raw.api_client, namespace="other")
    assert jobs.namespace == "other" and jobs.list() == []


def test_wrong_credentials_are_not_retried(standin, tmp_path, fake_time):
    path = standin.kubeconfig(tmp_path / "kc")
    path.write_text(path.read_text().replace("test-token", "wrong"))
    jobs = DeciceJobClient(kubeconfig=str(path), sleep=fake_time.sleep)
    with pytest.raises(ApiError) as info:
        jobs.list()
    assert info.value.status == 401 and fake_time.sleeps == []


def test_unusable_kubeconfig(tmp_path):
    (tmp_path / "kc").write_text("clusters: [")
    with pytest.raises(ConfigError, match="cannot load the cluster configuration"):
        DeciceJobClient(kubeconfig=str(tmp_path / "kc"))
    with pytest.raises(ConfigError):
        DeciceJobClient(kubeconfig=str(tmp_path / "missing"))


# --- submit, get, list, delete ---------------------------------------------------------------


def test_submit_creates_and_the_api_server_applies_defaults(jobs, standin):
    job, created = jobs.submit(job_manifest(tasks=[task("main")]))
    assert created and job["metadata"]["uid"] and job["metadata"]["generation"] == 1
    assert job["spec"]["tasks"][0]["replicas"] == 1 and job["spec"]["backoffLimit"] == 3
    assert jobs.get("demo") == job


def test_submitting_the_same_job_again_is_a_no_op(jobs, standin):
    first, _ = jobs.submit(job_manifest())
    revision = standin.store.revision
    again, created = jobs.submit(job_manifest())
    assert not created and again == first and standin.store.revision == revision


def test_a_different_spec_under_the_same_name_is_a_conflict(jobs, standin):
    jobs.submit(job_manifest())
    with pytest.raises(SpecConflict, match="team-a/demo already exists with a different spec"):
        jobs.submit(job_manifest(tasks=[task("main", replicas=2)]))
    with pytest.raises(SpecConflict):
        jobs.submit(labelled("demo", owner="someone-else"))
    assert jobs.get("demo")["spec"]["tasks"] == [{"name": "main", "image": "busybox:1.36", "replicas": 1,
                                                  "restartPolicy": "Never"}]


def test_an_invalid_job_is_refused_before_it_is_sent(jobs, standin):
    with pytest.raises(InvalidJob, match="zzz"):
        jobs.submit(job_manifest(tasks=[task("a", dependsOn=["zzz"])]))
    with pytest.raises(InvalidJob, match="namespace"):
        jobs.submit(job_manifest(), namespace="elsewhere")
    assert standin.log("POST") == []


def test_a_job_the_api_server_rejects(jobs, standin, fake_time):
    standin.inject(422, method="POST", message='DeciceJob.dev.decice.com "demo" is invalid: spec.queue: Too long')
    with pytest.raises(Rejected) as info:
        jobs.submit(job_manifest())
    assert info.value.status == 422 and "spec.queue: Too long" in str(info.value) and fake_time.sleeps == []


def test_list_with_label_selectors(jobs):
    jobs.submit(labelled("a", tier="gold", team="x"))
    jobs.submit(labelled("b", tier="silver"))
    jobs.submit(labelled("c", team="y"))
    jobs.submit({**labelled("d", tier="gold"), "metadata": {**labelled("d", tier="gold")["metadata"], "namespace": "team-b"}})

    def names(**kwargs) -> list[str]:
        return [j["metadata"]["name"] for j in jobs.list(**kwargs)]

    assert names() == ["a", "b", "c"]
    assert names(label_selector="tier=gold") == ["a"]
    assert names(label_selector="tier in (gold,silver),!team") == ["b"]
    assert names(label_selector="tier!=gold") == ["b", "c"]
    assert names(label_selector="team,tier notin (silver)") == ["a", "c"]
    assert names(namespace="team-b") == ["d"]
    assert names(all_namespaces=True, label_selector="tier=gold") == ["a", "d"]


def test_get_and_delete_of_a_missing_job(jobs, fake_time):
    with pytest.raises(NotFound, match='"nope" not found'):
        jobs.get("nope")
    with pytest.raises(NotFound):
        jobs.delete("nope")
    assert fake_time.sleeps == []


def test_delete_with_propagation(jobs, standin):
    jobs.submit(job_manifest())
    jobs.delete("demo", propagation="Foreground")
    assert standin.store.deletions == [("team-a", "demo", "Foreground")]
    with pytest.raises(ValueError):
        jobs.delete("demo", propagation="Eventually")


def test_delete_of_a_job_with_a_finalizer_marks_it(jobs, standin):
    jobs.submit(job_manifest())
    standin.store.patch("team-a", "demo", {"metadata": {"finalizers": ["example.com/keep"]}})
    jobs.delete("demo")
    assert jobs.get("demo")["metadata"]["deletionTimestamp"]
    standin.store.patch("team-a", "demo", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFound):
        jobs.get("demo")


# --- retries ----------------------------------------------------------------------------------


def test_429_waits_as_long_as_retry_after_asks(jobs, standin, fake_time):
    standin.inject(429, retry_after="7", message="too many requests, slow down")
    standin.inject(429, retry_after=format_datetime(jobs._now() + timedelta(seconds=12), usegmt=True))
    assert jobs.list() == []
    assert fake_time.sleeps == [7.0, 12.0]


def test_server_errors_back_off_exponentially(jobs, standin, fake_time):
    standin.inject(500, times=1)
    standin.inject(503, times=2)
    jobs.list()
    assert fake_time.sleeps == [0.5, 1.0, 2.0]


def test_the_back_off_is_capped(fake_time):
    policy = RetryPolicy(attempts=10, base_delay=1, max_delay=5)
    assert [policy.delay(n) for n in range(5)] == [1, 2, 4, 5, 5]


def test_retries_give_up_with_the_api_message(jobs, standin, fake_time):
    standin.inject(503, times=10, message="etcd leader changed")
    with pytest.raises(ApiError) as info:
        jobs.get("demo")
    assert info.value.status == 503 and info.value.message == "etcd leader changed"
    assert len(standin.log("GET")) == 4 and len(fake_time.sleeps) == 3


@pytest.mark.parametrize("status", [400, 403, 404, 409, 422])
def test_other_client_errors_are_not_retried(jobs, standin, fake_time, status):
    standin.inject(status, method="GET")
    with pytest.raises(ApiError) as info:
        jobs.list()
    assert info.value.status == status and fake_time.sleeps == [] and len(standin.log("GET")) == 1


def test_dropped_connections_are_retried(jobs, standin, fake_time):
    standin.inject(disconnect=True, method="POST", times=2)
    assert jobs.submit(job_manifest()).created
    assert fake_time.sleeps == [0.5, 1.0] and len(standin.log("POST")) == 3


def test_an_unreachable_api_server(standin, tmp_path, fake_time):
    path = standin.kubeconfig(tmp_path / "kc")
    with APIServer() as gone:
        port = gone.url.rsplit(":", 1)[1]
    path.write_text(path.read_text().replace(standin.url.rsplit(":", 1)[1], port))
    jobs = DeciceJobClient(kubeconfig=str(path), retry=RetryPolicy(attempts=3), sleep=fake_time.sleep,
                           request_timeout=5)
    with pytest.raises(ConnectionFailed, match="cannot reach the API server"):
        jobs.list()
    assert fake_time.sleeps == [0.5, 1.0]


# --- watch ----------------------------------------------------------------------------------------


def rv(obj: dict) -> str:
    return obj["metadata"]["resourceVersion"]


def test_watch_reports_changes_in_order(jobs, standin, raw):
    jobs.submit(job_manifest("a"))
    standin.hold = 0.3
    events = jobs.watch(timeout=30)
    first = next(events)
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "a")
    set_status(raw, "a", phase="Running")
    jobs.submit(job_manifest("b"))
    jobs.delete("a")
    seen = [(e.type, e.object["metadata"]["name"]) for e in islice(events, 3)]
    assert seen == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    events.close()


def test_watch_resumes_from_the_last_resource_version_after_a_disconnect(jobs, standin, raw):
    jobs.submit(job_manifest("a"))
    start = rv(jobs.get("a"))
    for phase in ("Pending", "Running", "Succeeded"):
        set_status(raw, "a", phase=phase)
    standin.inject(disconnect=True, watch=True, after_events=1)
    events = jobs.watch(name="a", resource_version=start, timeout=30)
    phases = [e.object["status"]["phase"] for e in islice(events, 3)]
    events.close()
    assert phases == ["Pending", "Running", "Succeeded"], "each change exactly once"
    first, second = standin.log("GET", watch=True)[:2]
    assert first.query["resourceVersion"] == start
    assert second.query["resourceVersion"] == str(int(start) + 1)
    assert second.query["fieldSelector"] == "metadata.name=a"


@pytest.mark.parametrize("how", ["event", "status"])
def test_watch_lists_again_after_410_gone(jobs, standin, raw, how):
    jobs.submit(job_manifest("a"))
    jobs.submit(job_manifest("b"))
    events = jobs.watch(timeout=30)
    assert [next(events).type for _ in range(2)] == ["ADDED", "ADDED"]
    set_status(raw, "a", phase="Running")
    jobs.delete("b")
    if how == "event":
        standin.store.compact()
    else:
        standin.inject(410, watch=True, message="too old resource version")
    jobs.submit(job_manifest("c"))
    seen = sorted((e.type, e.object["metadata"]["name"]) for e in islice(events, 3))
    events.close()
    assert seen == [("ADDED", "c"), ("DELETED", "b"), ("MODIFIED", "a")]
    calls = [(r.query.get("watch") == "true") for r in standin.log("GET")]
    assert calls[:3] == [False, True, False], "list, watch (410), list again"


def test_watch_gives_up_after_repeated_breaks(jobs, standin, fake_time):
    standin.inject(disconnect=True, watch=True, after_events=0, times=10)
    with pytest.raises(ConnectionFailed, match="the watch keeps breaking off"):
        list(jobs.watch(resource_version="1", timeout=60))
    assert fake_time.sleeps == [0.5, 1.0, 2.0]


# --- wait ------------------------------------------------------------------------------------------


def finish_later(standin: APIServer, raw, name: str, *phases: str) -> threading.Thread:
    """Once ``wait`` is watching, move the job through ``phases`` (as the hooks would)."""

    def run() -> None:
        standin.wait_for(lambda r: r.query.get("watch") == "true")
        for phase in phases:
            set_status(raw, name, phase=phase)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("final", ["Succeeded", "Failed"])
def test_wait_returns_the_finished_job(jobs, standin, raw, final):
    jobs.submit(job_manifest())
    thread = finish_later(standin, raw, "demo", "Pending", "Running", final)
    job = jobs.wait("demo", timeout=30)
    thread.join(timeout=10)
    assert job["status"]["phase"] == final


def test_wait_on_a_finished_job_returns_at_once(jobs, standin, raw):
    jobs.submit(job_manifest())
    set_status(raw, "demo", phase="Succeeded")
    assert jobs.wait("demo")["status"]["phase"] == "Succeeded"
    assert standin.log("GET", watch=True) == []


def test_wait_survives_disconnects_and_410(jobs, standin, raw):
    jobs.submit(job_manifest())
    standin.inject(disconnect=True, watch=True, after_events=1)
    standin.inject(410, watch=True)
    thread = finish_later(standin, raw, "demo", "Pending", "Running", "Succeeded")
    assert jobs.wait("demo", timeout=30)["status"]["phase"] == "Succeeded"
    thread.join(timeout=10)
    assert len(standin.log("GET", watch=True)) >= 2


def test_wait_times_out(kubeconfig, standin, raw):
    ticking = FakeTime(tick=3.0)
    jobs = DeciceJobClient(kubeconfig=str(kubeconfig), sleep=ticking.sleep, clock=ticking.clock)
    jobs.submit(job_manifest())
    set_status(raw, "demo", phase="Running")
    standin.hold = 0.05
    with pytest.raises(WaitTimeout, match="timed out after 10s waiting for decicejobs.dev.decice.com team-a/demo "
                                          r"\(phase Running\)") as info:
        jobs.wait("demo", timeout=10)
    assert info.value.job["status"]["phase"] == "Running"


def test_wait_for_a_missing_or_deleted_job(jobs, standin):
    with pytest.raises(NotFound, match="not found"):
        jobs.wait("demo", timeout=30)
    jobs.submit(job_manifest())

    def delete_later() -> None:
        standin.wait_for(lambda r: r.query.get("watch") == "true")
        standin.store.delete("team-a", "demo")

    threading.Thread(target=delete_later, daemon=True).start()
    with pytest.raises(NotFound, match="was deleted while waiting"):
        jobs.wait("demo", timeout=30)


# --- gc -----------------------------------------------------------------------------------------------


def test_gc_deletes_finished_jobs_past_their_ttl(jobs, standin, raw, clock):
    for name, ttl, phase, age in [("old", 60, "Succeeded", 120), ("failed", 0, "Failed", 1),
                                  ("fresh", 600, "Succeeded", 120), ("running", 60, "Running", None),
                                  ("forever", None, "Succeeded", 10_000)]:
        manifest = job_manifest(name)
        if ttl is not None:
            manifest["spec"]["ttlSecondsAfterFinished"] = ttl
        jobs.submit(manifest)
        status = {"phase": phase, **({"completionTime": clock.stamp(age)} if age is not None else {})}
        set_status(raw, name, **status)
    assert [j["metadata"]["name"] for j in jobs.gc(dry_run=True)] == ["failed", "old"]
    assert standin.store.deletions == []
    assert [j["metadata"]["name"] for j in jobs.gc()] == ["failed", "old"]
    assert [j["metadata"]["name"] for j in jobs.list()] == ["forever", "fresh", "running"]
    clock.advance(600)
    assert [j["metadata"]["name"] for j in jobs.gc()] == ["fresh"]
