"""The real server: ``decice-hooks`` (gunicorn) on a loopback port, driven over HTTP."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from tests.conftest import job_manifest, task
from tests.driver import Cluster, Controller, HTTPTransport, Kubelet
from tests.helpers import phase
from tests.servers import hook_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with hook_server(tmp_path_factory.mktemp("gunicorn"), env={"DECICE_HOOKS_WORKERS": "2",
                                                               "DECICE_HOOKS_THREADS": "2"}) as running:
        yield running.url


def raw_post(url: str, body: bytes, headers: dict | None = None) -> tuple[int, bytes]:
    return HTTPTransport(url, timeout=10, headers=headers).post("/sync", body)


def test_job_runs_end_to_end_over_http(server):
    cluster = Cluster()
    controller = Controller(cluster, HTTPTransport(server))
    kubelet = Kubelet(cluster)
    job = cluster.create_job(job_manifest(tasks=[task("a", replicas=2), task("b", dependsOn=["a"])]))
    controller.run_until(job, lambda j: phase(j) == "Succeeded", kubelet=lambda: kubelet.finish_all(cluster.pods(job)))
    assert [p["metadata"]["name"] for p in cluster.pods(job)] == ["demo-a-0", "demo-a-1", "demo-b-0"]


def test_same_request_same_bytes_across_workers(server):
    cluster = Cluster()
    controller = Controller(cluster, HTTPTransport(server))
    job = cluster.create_job(job_manifest(tasks=[task("a", replicas=3)]))
    controller.sync(job)
    Kubelet(cluster).run_all(cluster.pods(job))
    controller.sync(job)
    controller.sync(job)
    responses = {raw_post(server, controller.last_request)[1] for _ in range(8)}
    assert len(responses) == 1


def test_errors_over_http(server):
    status, body = raw_post(server, b"{nope")
    assert status == 400 and json.loads(body)["error"] == "MalformedJSON"
    request = urllib.request.Request(server + "/missing")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(server + "/sync", timeout=5)
    assert caught.value.code == 405
    with urllib.request.urlopen(server + "/readyz", timeout=5) as response:
        assert response.status == 200


def test_oversized_body_is_refused_before_it_is_read(server):
    """Content-Length over the limit: 413 at once, without sending the body."""
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 999999999999\r\nConnection: close\r\n\r\n")
        reply = sock.recv(4096).decode(errors="replace")
    assert reply.startswith("HTTP/1.1 413")
