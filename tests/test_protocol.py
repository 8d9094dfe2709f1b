"""The hook's HTTP surface: what it answers to good, bad and surprising requests."""

from __future__ import annotations

import json

import pytest

from hooks.app import create_app
from tests.conftest import job_manifest, task
from tests.helpers import condition, names, phase


def post(client, path: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body)
    response = client.post(path, data=data, content_type="application/json")
    return response.status_code, response.get_json()


def test_health_endpoints(client):
    for path in ("/healthz", "/readyz"):
        response = client.get(path)
        assert response.status_code == 200 and response.is_json


@pytest.mark.parametrize("body", [b"{", b"not json", b"", b"\xff\xfe", b'{"parent": ', b"[1, 2"])
def test_malformed_json_is_400(client, body):
    status, payload = post(client, "/sync", body)
    assert status == 400 and payload["error"] == "MalformedJSON"


@pytest.mark.parametrize("body", [
    [], "just a string", 42, {}, {"parent": None}, {"parent": {"spec": {}}},
    {"parent": {"metadata": {"name": "x"}, "kind": "Deployment"}},
    {"parent": {"metadata": {"name": "x"}}, "children": []},
    {"parent": {"metadata": {"name": "x"}}, "children": {"Pod.v1": [1]}},
    {"parent": {"metadata": {"name": "x"}}, "children": {"Pod.v1": {"a": 1}}},
    {"parent": {"metadata": {"name": "x"}}, "children": {"Pod.v1": {"a": {"metadata": {}}}}},
    {"parent": {"metadata": {"name": "x"}}, "finalizing": "yes"},
])
def test_not_a_hook_request_is_400(client, body):
    status, payload = post(client, "/sync", body)
    assert status == 400 and payload["error"] == "BadRequest"


def test_oversized_body_is_413():
    client = create_app({"MAX_CONTENT_LENGTH": 1024}).test_client()
    status, payload = post(client, "/sync", b"{" + b" " * 4096 + b"}")
    assert status == 413 and payload["error"] == "RequestEntityTooLarge"


def test_unknown_path_and_wrong_method(client):
    response = client.get("/nope")
    assert response.status_code == 404 and response.get_json()["error"] == "NotFound"
    response = client.get("/sync")
    assert response.status_code == 405 and "POST" in response.headers["Allow"]
    assert response.get_json()["error"] == "MethodNotAllowed"


def test_unexpected_exception_is_500_and_the_app_lives_on(monkeypatch, client, caplog):
    import hooks.app

    def boom(*_args, **_kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(hooks.app, "handle", boom)
    status, payload = post(client, "/sync", {"parent": {"metadata": {"name": "x"}}})
    assert status == 500 and payload["error"] == "InternalError"
    assert "secret internals" not in json.dumps(payload)
    assert any("unexpected error" in r.message for r in caplog.records)
    monkeypatch.undo()
    assert client.get("/healthz").status_code == 200


def test_response_carries_only_fields_strict_unmarshalling_accepts(controller, submit):
    job = submit(job_manifest())
    response = controller.sync(job)
    assert set(response) <= {"status", "children", "resyncAfterSeconds"}


def test_invalid_spec_keeps_every_child_and_creates_none(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[task("a", replicas=2), task("b", dependsOn=["a"])],
                              volumes=[{"name": "data", "size": "1Gi"}]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    before = {(o["kind"], o["metadata"]["name"]) for o in cluster.children_of(job)}
    assert phase(job) == "Running"

    controller.validate = None  # the API server would refuse this spec; an old one may still reach the hook
    cluster.update_job_spec(job, {"tasks": [task("a", replicas=2), task("b", dependsOn=["a", "ghost"])],
                                  "volumes": [{"name": "data", "size": "1Gi"}]})
    response = controller.sync(job)
    after = {(o["kind"], o["metadata"]["name"]) for o in cluster.children_of(job)}
    assert after == before
    assert len(response["children"]) == len(before)
    assert phase(job) == "Running", "the phase keeps its last value"
    invalid = condition(job, "InvalidSpec")
    assert invalid["status"] == "True" and "ghost" in invalid["message"]
    assert invalid["observedGeneration"] == 2
    assert condition(job, "Progressing")["status"] == "False"

    cluster.update_job_spec(job, {"tasks": [task("a", replicas=2), task("b", dependsOn=["a"])],
                                  "volumes": [{"name": "data", "size": "1Gi"}]})
    controller.sync(job)
    assert condition(job, "InvalidSpec")["status"] == "False"


def test_invalid_spec_on_a_new_job_reports_every_error(controller, cluster, submit):
    controller.validate = None
    job = submit(job_manifest(tasks=[task("a", dependsOn=["b"]), task("b", dependsOn=["a"]),
                                     task("c", replicas=0)]))
    response = controller.sync(job)
    assert response["children"] == []
    assert phase(job) == "Pending"
    message = condition(job, "InvalidSpec")["message"]
    assert "replicas" in message


def test_cycle_is_invalid_spec(controller, submit):
    controller.validate = None
    job = submit(job_manifest(tasks=[task("a", dependsOn=["c"]), task("b", dependsOn=["a"]),
                                     task("c", dependsOn=["b"])]))
    controller.sync(job)
    assert "dependency cycle" in condition(job, "InvalidSpec")["message"]


def test_missing_child_resource_is_a_condition(cluster, app, submit):
    from tests.driver import Controller, FlaskTransport, load_controller

    cc = load_controller()
    cc["spec"]["childResources"] = [r for r in cc["spec"]["childResources"] if r["resource"] != "persistentvolumeclaims"]
    controller = Controller(cluster, FlaskTransport(app), controller=cc)
    job = submit(job_manifest(volumes=[{"name": "data", "size": "1Gi"}],
                              tasks=[task("a", volumeMounts=[{"volume": "data", "mountPath": "/d"}])]))
    response = controller.sync(job)
    assert response["children"] == []
    progressing = condition(job, "Progressing")
    assert progressing["reason"] == "RuntimeUnavailable"
    assert "PersistentVolumeClaim.v1" in progressing["message"]


def test_unknown_runtime_kind_is_a_condition_not_a_crash(controller, submit):
    job = submit(job_manifest(runtime="sedna", sedna={"kind": "Unknown"}, tasks=[task("a")]))
    controller.validate = None
    response = controller.sync(job)
    assert response["children"] == []
    assert condition(job, "Progressing")["reason"] == "InvalidSpec"
    assert "spec.sedna.kind" in condition(job, "InvalidSpec")["message"]


def test_children_from_another_namespace_are_never_written(client):
    parent = job_manifest()
    parent["metadata"]["uid"] = "u1"
    foreign = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "demo-main-0", "namespace": "other"}}
    status, payload = post(client, "/sync", {"parent": parent, "children": {"Pod.v1": {"other/demo-main-0": foreign}}})
    assert status == 200
    assert all(c["metadata"]["namespace"] == "team-a" for c in payload["children"])


def test_finalize_tears_down_pods_first(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[task("a", replicas=2)], volumes=[{"name": "data", "size": "1Gi"}]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    controller.delete_job(job)
    response = controller.sync(job)
    assert response["finalized"] is False, "pods were still observed"
    assert cluster.pods(job) == []
    assert names(cluster.children_of(job, "PersistentVolumeClaim.v1")) == ["demo-data"]
    response = controller.sync(job)
    assert response["finalized"] is True
    assert ("team-a", "demo") not in cluster.jobs


def test_finalize_of_an_invalid_job_still_completes(controller, cluster, kubelet, submit):
    job = submit(job_manifest())
    controller.sync(job)
    controller.validate = None
    cluster.update_job_spec(job, {"tasks": []})
    controller.delete_job(job)
    assert controller.sync(job)["finalized"] is False
    assert cluster.pods(job) == []
    assert controller.sync(job)["finalized"] is True
