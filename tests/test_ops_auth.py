"""Bearer tokens: required on the hooks when configured, rotated without a restart."""

from __future__ import annotations

import json
import os

import pytest

from hooks import auth, config
from hooks.app import create_app
from tests.conftest import job_manifest, task
from tests.driver import Cluster, Controller, HTTPTransport, Kubelet
from tests.helpers import phase
from tests.servers import hook_server

REQUEST = {"parent": {"apiVersion": "dev.decice.com/v1alpha1", "kind": "DeciceJob",
                      "metadata": {"name": "demo", "namespace": "team-a", "uid": "u1", "generation": 1},
                      "spec": {"tasks": [{"name": "main", "image": "busybox:1.36"}]}},
           "children": {"Pod.v1": {}, "Service.v1": {}, "PersistentVolumeClaim.v1": {}}}


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("first-token\n")
    return path


@pytest.fixture
def client(token_file):
    settings = config.load([], {"DECICE_HOOKS_AUTH_TOKEN_FILE": str(token_file)})
    return create_app(settings=settings).test_client()


def post(client, token: str | None, body=REQUEST, path: str = "/sync", scheme: str = "Bearer"):
    headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
    data = body if isinstance(body, bytes) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", headers=headers)


def rewrite(path, text: str) -> None:
    """Replace the file the way the kubelet updates a Secret volume: a new file moved into place."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.replace(fresh, path)


@pytest.mark.parametrize("path", ["/sync", "/finalize"])
def test_hooks_need_the_token(client, path):
    for token, scheme in ((None, "Bearer"), ("wrong-token", "Bearer"), ("first-token", "Basic"), ("", "Bearer"),
                          ("first-tokenX", "Bearer"), ("first-toke", "Bearer")):
        response = post(client, token, path=path, scheme=scheme)
        assert response.status_code == 401, (token, scheme)
        assert response.get_json() == {"error": "Unauthorized", "message": "missing or invalid bearer token"}
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert post(client, "first-token", path=path).status_code == 200
    assert post(client, "first-token", path=path, scheme="bearer").status_code == 200


def test_probes_and_metrics_need_no_token(client):
    for path in ("/healthz", "/readyz", "/metrics"):
        assert client.get(path).status_code == 200, path


def test_unauthenticated_body_is_never_parsed(client):
    response = post(client, None, body=b"{not json")
    assert response.status_code == 401


def test_rotation_without_restart(client, token_file):
    assert post(client, "first-token").status_code == 200
    rewrite(token_file, "first-token\nsecond-token\n")
    assert post(client, "first-token").status_code == 200
    assert post(client, "second-token").status_code == 200
    rewrite(token_file, "second-token\n")
    assert post(client, "first-token").status_code == 401
    assert post(client, "second-token").status_code == 200


def test_rotation_in_place_of_same_size_is_seen(client, token_file):
    token_file.write_text("aaaaaaaaaaa\n")
    stat = token_file.stat()
    token_file.write_text("bbbbbbbbbbb\n")
    os.utime(token_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert post(client, "aaaaaaaaaaa").status_code == 401
    assert post(client, "bbbbbbbbbbb").status_code == 200


def test_unusable_token_file_fails_closed(client, token_file, caplog):
    token_file.unlink()
    response = post(client, "first-token")
    assert response.status_code == 503 and response.get_json()["error"] == "AuthUnavailable"
    assert any("cannot check bearer tokens" in r.getMessage() for r in caplog.records)
    token_file.write_text("   \n")
    assert post(client, "first-token").status_code == 503
    token_file.write_text("first-token")
    assert post(client, "first-token").status_code == 200


def test_token_comparison():
    accepted = (b"alpha", b"beta")
    assert auth.token_accepted(b"beta", accepted)
    assert not auth.token_accepted(b"gamma", accepted)
    assert not auth.token_accepted(None, accepted)
    assert auth.bearer_token("Bearer  abc ") == b"abc"
    assert auth.bearer_token("BEARER abc") == b"abc"
    assert auth.bearer_token("Bearer") is None
    assert auth.bearer_token("Token abc") is None
    assert auth.bearer_token("Bearer caf\u00e9") == "caf\u00e9".encode()


def test_over_gunicorn_with_metacontroller_headers(tmp_path, token_file):
    with hook_server(tmp_path, env={"DECICE_HOOKS_AUTH_TOKEN_FILE": str(token_file),
                                    "DECICE_HOOKS_WORKERS": "2"}) as server:
        status, _, body = server.request("/sync", json.dumps(REQUEST).encode())
        assert status == 401 and json.loads(body)["error"] == "Unauthorized"
        cluster = Cluster()
        controller = Controller(cluster, HTTPTransport(server.url, headers={"Authorization": "Bearer first-token"}))
        kubelet = Kubelet(cluster)
        job = cluster.create_job(job_manifest(tasks=[task("a", replicas=2)]))
        controller.run_until(job, lambda j: phase(j) == "Succeeded", kubelet=lambda: kubelet.finish_all(cluster.pods(job)))
        rewrite(token_file, "second-token\n")
        status, _, _ = server.request("/sync", json.dumps(REQUEST).encode(),
                                      headers={"Authorization": "Bearer first-token"})
        assert status == 401
        status, _, _ = server.request("/sync", json.dumps(REQUEST).encode(),
                                      headers={"Authorization": "Bearer second-token"})
        assert status == 200
