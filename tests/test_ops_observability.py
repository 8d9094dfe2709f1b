"""One structured log line per hook call, request ids, and Prometheus metrics (also across workers)."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hooks import logs
from tests.conftest import job_manifest, task
from tests.servers import hook_server
from tests.test_ops_auth import REQUEST


@pytest.fixture
def log_stream():
    """The ``hooks`` loggers writing JSON into a buffer, restored afterwards."""
    logger = logging.getLogger(logs.LOGGER)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    stream = io.StringIO()
    logs.configure("info", "json", stream)
    yield stream
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def post(client, body, headers=None, path="/sync"):
    data = body if isinstance(body, bytes) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", headers=headers or {})


def with_spec(spec: dict) -> dict:
    body = json.loads(json.dumps(REQUEST))
    body["parent"]["spec"] = spec
    return body


def test_one_line_per_hook_call(client, log_stream):
    secret_env = {"name": "PASSWORD", "value": "hunter2-in-the-body"}
    body = with_spec({"tasks": [{"name": "main", "image": "busybox:1.36", "env": [secret_env]}]})
    response = post(client, body, headers={"X-Request-Id": "req-42", "Authorization": "Bearer tok3n"})
    assert response.status_code == 200 and response.headers["X-Request-Id"] == "req-42"
    (line,) = lines(log_stream)
    assert line["logger"] == "hooks.calls" and line["level"] == "info" and line["msg"] == "hook call"
    assert {k: line[k] for k in ("hook", "requestId", "namespace", "name", "uid", "generation", "status",
                                 "outcome", "children", "phase")} == {
        "hook": "sync", "requestId": "req-42", "namespace": "team-a", "name": "demo", "uid": "u1",
        "generation": 1, "status": 200, "outcome": "ok", "children": 2, "phase": "Pending"}
    assert isinstance(line["durationMs"], float) and line["durationMs"] >= 0
    text = log_stream.getvalue()
    assert "hunter2" not in text and "tok3n" not in text and "busybox" not in text


def test_refusals_and_rejections_are_logged_with_their_reason(client, log_stream):
    post(client, with_spec({"tasks": []}), path="/finalize")
    post(client, b"{broken")
    post(client, {"parent": "nope"})
    refused, malformed, bad = lines(log_stream)
    assert (refused["hook"], refused["outcome"], refused["reason"], refused["level"]) == (
        "finalize", "refused", "InvalidSpec", "warning")
    assert refused["name"] == "demo" and refused["children"] == 0
    assert (malformed["status"], malformed["outcome"], malformed["reason"]) == (400, "rejected", "MalformedJSON")
    assert "name" not in malformed
    assert (bad["status"], bad["reason"]) == (400, "BadRequest")


def test_unexpected_errors_are_logged_with_the_parent(monkeypatch, client, log_stream):
    import hooks.app

    def boom(*_args, **_kwargs):
        raise RuntimeError("internal detail")

    monkeypatch.setattr(hooks.app, "handle", boom)
    response = post(client, REQUEST)
    assert response.status_code == 500 and "internal detail" not in response.get_data(as_text=True)
    trace, call = lines(log_stream)
    assert trace["level"] == "error" and "internal detail" in trace["exception"]
    assert (call["outcome"], call["reason"], call["name"], call["level"]) == ("error", "InternalError", "demo", "error")


def test_request_ids(client):
    generated = {post(client, REQUEST).headers["X-Request-Id"] for _ in range(3)}
    assert len(generated) == 3 and all(len(i) == 32 for i in generated)
    assert post(client, REQUEST, headers={"X-Request-Id": "a" * 129}).headers["X-Request-Id"] != "a" * 129
    assert post(client, REQUEST, headers={"X-Request-Id": "bad id;x"}).headers["X-Request-Id"] != "bad id;x"
    assert logs.request_id("abc-123_x.y:z") == "abc-123_x.y:z"


def test_text_format():
    record = logging.LogRecord("hooks.calls", logging.INFO, __file__, 1, "hook call", None, None)
    record.fields = {"hook": "sync", "outcome": "ok"}
    line = logs.TextFormatter().format(record)
    assert line.endswith("Z info hooks.calls: hook call hook=sync outcome=ok")


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_count_calls_errors_latency_and_phases(client):
    post(client, REQUEST)
    post(client, REQUEST, path="/finalize")
    post(client, with_spec({"tasks": "nope"}))
    post(client, b"[")
    response = client.get("/metrics")
    assert response.status_code == 200 and response.content_type.startswith("text/plain")
    values = samples(response.get_data(as_text=True))
    assert values[("decice_hooks_requests_total", (("hook", "sync"), ("outcome", "ok")))] == 1
    assert values[("decice_hooks_requests_total", (("hook", "finalize"), ("outcome", "ok")))] == 1
    assert values[("decice_hooks_requests_total", (("hook", "sync"), ("outcome", "refused")))] == 1
    assert values[("decice_hooks_requests_total", (("hook", "sync"), ("outcome", "rejected")))] == 1
    assert values[("decice_hooks_errors_total", (("hook", "sync"), ("reason", "InvalidSpec")))] == 1
    assert values[("decice_hooks_errors_total", (("hook", "sync"), ("reason", "MalformedJSON")))] == 1
    assert values[("decice_hooks_request_duration_seconds_count", (("hook", "sync"),))] == 3
    assert values[("decice_hooks_job_phase_total", (("phase", "Pending"),))] == 2
    assert values[("decice_hooks_job_transitions_total", (("phase", "Pending"),))] == 2


def test_metrics_transition_counts_only_phase_changes(controller, cluster, submit, kubelet, client):
    job = submit(job_manifest(tasks=[task("a")]))
    controller.sync(job)
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    values = samples(client.get("/metrics").get_data(as_text=True))
    assert values[("decice_hooks_job_phase_total", (("phase", "Pending"),))] == 2
    assert values[("decice_hooks_job_transitions_total", (("phase", "Pending"),))] == 1
    assert values[("decice_hooks_job_transitions_total", (("phase", "Running"),))] == 1


def scrape(url: str) -> dict:
    request = urllib.request.Request(url + "/metrics", headers={"Connection": "close"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return samples(response.read().decode())


def test_metrics_add_up_across_gunicorn_workers(tmp_path):
    metrics_tmp = tmp_path / "tmp"
    metrics_tmp.mkdir()
    calls = 24
    with hook_server(tmp_path, env={"DECICE_HOOKS_WORKERS": "3", "DECICE_HOOKS_THREADS": "1",
                                    "TMPDIR": str(metrics_tmp)}) as server:
        (directory,) = list(metrics_tmp.glob("decice-hooks-metrics-*"))
        body = json.dumps(REQUEST).encode()
        for _ in range(calls):
            assert server.request("/sync", body, headers={"Connection": "close"})[0] == 200
        key = ("decice_hooks_requests_total", (("hook", "sync"), ("outcome", "ok")))
        assert {scrape(server.url)[key] for _ in range(6)} == {calls}
        workers = sorted(int(p.stem.rpartition("_")[2]) for p in directory.glob("counter_*.db"))
        assert workers, "workers write their values to the shared directory"
        ready = server.count("Worker ready")
        os.kill(workers[0], signal.SIGKILL)
        server.wait(lambda: server.count("Worker ready") > ready)
        assert {scrape(server.url)[key] for _ in range(6)} == {calls}, "a dead worker's counts stay"
    assert not directory.exists(), "the launcher removes the metrics directory"
