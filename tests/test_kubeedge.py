"""The kubeedge runtime: edge Pods and EdgeApplications, and jobs walked through the protocol
driver with KubeEdge's status played by ``tests.runtime_sims.EdgeApplicationSim``."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml

from hooks.policy import Policy
from hooks.sync import handle, render
from tests.conftest import job_manifest, task
from tests.helpers import condition, names, phase, task_status
from tests.runtime_sims import (
    EDGE_APPLICATION, EdgeApplicationSim, assert_replay_is_byte_identical, child_errors, runtime_controller,
)
from tests.schemas import CRDValidator, builtin_errors, reference_crd_path
from tests.test_cli_render import decice

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
EDGE_TAINT = {"key": "node-role.kubernetes.io/edge", "operator": "Exists", "effect": "NoSchedule"}
GROUPS = [{"name": "factory-1", "replicas": 2}, {"name": "factory-2", "replicas": 1}]


@pytest.fixture
def controller(cluster, app, crd_validator):
    return runtime_controller(cluster, app, crd_validator, "kubeedge")


@pytest.fixture
def kubeedge(cluster) -> EdgeApplicationSim:
    return EdgeApplicationSim(cluster)


def match_expressions(spec: dict) -> list[dict]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 1
    return terms[0]["matchExpressions"]


EDGE = job_manifest(
    name="edge", runtime="kubeedge",
    tasks=[
        task("sense", replicas=2, placement={"nodes": ["edge-a", "edge-b"], "nodeSelector": {"zone": "z1"},
                                             "tolerations": [{"key": "flaky", "operator": "Exists"}]}),
        task("infer", restartPolicy="Always", replicas=3, ports=[{"containerPort": 8080, "name": "http"}],
             placement={"nodeGroups": GROUPS, "nodeSelector": {"gpu": "yes"}, "nodes": ["edge-c", "edge-d"]},
             resources={"cpu": "500m", "memory": "1Gi"}),
        task("agent", restartPolicy="Always"),
    ],
)


def by_kind(children: list[dict], kind: str) -> list[dict]:
    return [c for c in children if c["kind"] == kind]


def test_generated_edge_application_validates_against_the_reference_crd():
    crd = CRDValidator.from_file(reference_crd_path("kubeedge", "apps_v1alpha1_edgeapplication.yaml"))
    children = render(EDGE, NOW, Policy(edge_tolerations=(EDGE_TAINT,)))
    (app,) = by_kind(children, "EdgeApplication")
    assert crd.errors(app) == []
    assert all(child_errors(c) == [] for c in children)
    assert builtin_errors(app["spec"]["workloadTemplate"]["manifests"][0]) == []


def test_batch_tasks_are_pods_bound_to_edge_nodes():
    children = render(EDGE, NOW, Policy(edge_tolerations=(EDGE_TAINT,)))
    pods = by_kind(children, "Pod")
    assert names(pods) == ["edge-sense-0", "edge-sense-1", "edge-agent-0"]
    sense0 = pods[0]["spec"]
    assert match_expressions(sense0) == [
        {"key": "node-role.kubernetes.io/edge", "operator": "Exists"},
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["edge-a"]},
    ]
    assert match_expressions(pods[1]["spec"])[1]["values"] == ["edge-b"], "replica i on nodes[i % len]"
    assert sense0["nodeSelector"] == {"zone": "z1"}
    assert sense0["tolerations"] == [{"key": "flaky", "operator": "Exists"}, EDGE_TAINT]
    agent = pods[2]["spec"]
    assert agent["restartPolicy"] == "Always", "a service task without node groups runs as pods"
    assert match_expressions(agent) == [{"key": "node-role.kubernetes.io/edge", "operator": "Exists"}]
    assert all(p["metadata"]["labels"]["dev.decice.com/task-index"] for p in pods)


def test_edge_tolerations_are_not_repeated():
    manifest = job_manifest(runtime="kubeedge", tasks=[task("a", placement={"tolerations": [EDGE_TAINT]})])
    (pod,) = render(manifest, NOW, Policy(edge_tolerations=(EDGE_TAINT,)))
    assert pod["spec"]["tolerations"] == [EDGE_TAINT]


def test_service_task_on_node_groups_is_an_edge_application():
    (app,) = by_kind(render(EDGE, NOW, Policy(edge_tolerations=(EDGE_TAINT,))), "EdgeApplication")
    assert app["metadata"]["name"] == "edge-infer" and app["metadata"]["namespace"] == "team-a"
    assert app["spec"]["workloadScope"] == {"targetNodeGroups": [
        {"name": "factory-1", "overriders": {"replicas": 2}},
        {"name": "factory-2", "overriders": {"replicas": 1}},
    ]}
    (deployment,) = app["spec"]["workloadTemplate"]["manifests"]
    assert (deployment["apiVersion"], deployment["kind"]) == ("apps/v1", "Deployment")
    assert deployment["metadata"]["namespace"] == "team-a", "KubeEdge creates it where the manifest says"
    template = deployment["spec"]["template"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert all(template["metadata"]["labels"][k] == v for k, v in selector.items())
    spec = template["spec"]
    assert "nodeSelector" not in spec, "KubeEdge replaces it with the node-group label"
    assert match_expressions(spec) == [
        {"key": "node-role.kubernetes.io/edge", "operator": "Exists"},
        {"key": "gpu", "operator": "In", "values": ["yes"]},
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["edge-c", "edge-d"]},
    ]
    assert spec["tolerations"] == [EDGE_TAINT]
    container = spec["containers"][0]
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP", "name": "http"}]
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}


def test_render_edge_job_through_the_cli(tmp_path):
    path = tmp_path / "edge.yaml"
    path.write_text(yaml.safe_dump(EDGE))
    result = decice("render", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr
    children = json.loads(result.stdout)
    assert [(c["kind"], c["metadata"]["name"]) for c in children] == [
        ("Pod", "edge-sense-0"), ("Pod", "edge-sense-1"), ("Pod", "edge-agent-0"), ("EdgeApplication", "edge-infer")]
    assert all(child_errors(c) == [] for c in children)
    as_yaml = decice("render", str(path))
    assert as_yaml.returncode == 0 and "&id" not in as_yaml.stdout, "no YAML anchors from shared objects"


def test_render_is_the_first_sync():
    parent = dict(EDGE, metadata={**EDGE["metadata"], "uid": "", "generation": 0})
    empty = {"Pod.v1": {}, "Service.v1": {}, "PersistentVolumeClaim.v1": {}, EDGE_APPLICATION: {}}
    assert render(EDGE, NOW) == handle({"parent": parent, "children": empty}, NOW)["children"]


# --- lifecycle through the protocol driver ---------------------------------------------------------


def test_edge_application_status_gates_its_dependents(controller, cluster, kubelet, kubeedge, submit):
    job = submit(job_manifest(runtime="kubeedge", tasks=[
        task("infer", restartPolicy="Always", placement={"nodeGroups": GROUPS}),
        task("feed", dependsOn=["infer"], runtime="kubernetes"),
    ]))
    controller.sync(job)
    assert names(cluster.children_of(job, EDGE_APPLICATION)) == ["demo-infer"]
    infer = task_status(job, "infer")
    assert (infer["phase"], infer["replicas"], infer["pending"]) == ("Pending", 3, 0)

    kubeedge.process(job, "demo-infer")
    controller.sync(job)
    infer = task_status(job, "infer")
    assert (infer["pending"], infer["message"]) == (3, "node groups not available yet: factory-1, factory-2")

    kubeedge.process(job, "demo-infer", available=("factory-1",))
    controller.sync(job)
    infer = task_status(job, "infer")
    assert (infer["phase"], infer["running"], infer["ready"], infer["pending"]) == ("Running", 2, 2, 1)
    assert cluster.pods(job) == [], "feed waits until every replica is ready"

    kubeedge.process(job, "demo-infer", available=("factory-1", "factory-2"))
    controller.sync(job)
    assert task_status(job, "infer")["ready"] == 3 and "message" not in task_status(job, "infer")
    assert names(cluster.pods(job)) == ["demo-feed-0"]

    kubelet.succeed(cluster.pod(job, "demo-feed-0"))
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert cluster.children_of(job, EDGE_APPLICATION) == [], "the service stops once the batch work is done"
    assert task_status(job, "infer")["phase"] == "Succeeded"


def test_node_group_edits_update_the_edge_application_in_place(controller, cluster, kubeedge, submit):
    job = submit(job_manifest(runtime="kubeedge", tasks=[
        task("infer", restartPolicy="Always", placement={"nodeGroups": GROUPS})]))
    controller.sync(job)
    kubeedge.process(job, "demo-infer", available=("factory-1", "factory-2"))
    uid = kubeedge.application(job, "demo-infer")["metadata"]["uid"]
    spec = json.loads(json.dumps(job["spec"]))
    spec["tasks"][0]["placement"]["nodeGroups"] = [{"name": "factory-1", "replicas": 4}]
    cluster.update_job_spec(job, spec)
    controller.sync(job)
    app = kubeedge.application(job, "demo-infer")
    assert app["metadata"]["uid"] == uid
    assert app["spec"]["workloadScope"]["targetNodeGroups"] == [{"name": "factory-1", "overriders": {"replicas": 4}}]
    assert task_status(job, "infer")["replicas"] == 4


def test_edge_batch_pods_retry_like_kubernetes_pods(controller, cluster, kubelet, submit, clock):
    job = submit(job_manifest(runtime="kubeedge", backoffLimit=1, tasks=[task("a", placement={"nodes": ["edge-a"]})]))
    controller.sync(job)
    kubelet.fail(cluster.pod(job, "demo-a-0"))
    response = controller.sync(job)
    assert response["resyncAfterSeconds"] == 10
    assert task_status(job, "a")["failed"] == 1 and task_status(job, "a")["runtime"] == "kubeedge"
    clock.advance(10)
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-a-0", "demo-a-0-1"]
    kubelet.run(cluster.pod(job, "demo-a-0-1"))
    controller.sync(job)
    assert task_status(job, "a")["nodes"] == ["edge-a"]
    kubelet.fail(cluster.pod(job, "demo-a-0-1"))
    controller.sync(job)
    assert phase(job) == "Failed" and condition(job, "Failed")["reason"] == "BackoffLimitExceeded"


def test_stuck_edge_pod_is_reported(controller, cluster, kubelet, submit):
    job = submit(job_manifest(runtime="kubeedge"))
    controller.sync(job)
    kubelet.unschedulable(cluster.pod(job, "demo-main-0"), message="0/3 nodes are available: 3 node(s) didn't match")
    controller.sync(job)
    assert condition(job, "Progressing")["reason"] == "Unschedulable"


def test_mixed_runtimes_share_the_job(controller, cluster, kubelet, submit):
    job = submit(job_manifest(tasks=[task("cloud", replicas=2), task("edge", runtime="kubeedge", replicas=2)]))
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-cloud-0", "demo-cloud-1", "demo-edge-0", "demo-edge-1"]
    cloud = cluster.pod(job, "demo-cloud-0")["spec"]
    assert "affinity" not in cloud, "kubernetes pods are not sent to the edge"
    kubelet.finish_all(cluster.pods(job))
    controller.sync(job)
    assert [task_status(job, t)["runtime"] for t in ("cloud", "edge")] == ["kubernetes", "kubeedge"]
    assert phase(job) == "Succeeded"


def test_finalize_removes_edge_applications_and_pods_first(controller, cluster, kubelet, kubeedge, submit):
    job = submit(job_manifest(runtime="kubeedge", tasks=[
        task("infer", restartPolicy="Always", placement={"nodeGroups": GROUPS}), task("a")]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.delete_job(job)
    response = controller.sync(job)
    assert response["finalized"] is False
    assert cluster.children_of(job, EDGE_APPLICATION) == [] and cluster.pods(job) == []
    assert controller.sync(job)["finalized"] is True


def test_batch_only_edge_job_needs_no_kubeedge_component(cluster, app, crd_validator, kubelet, submit):
    controller = runtime_controller(cluster, app, crd_validator)
    job = submit(job_manifest(runtime="kubeedge", tasks=[task("a"), task("svc", restartPolicy="Always")]))
    controller.sync(job)
    assert condition(job, "Progressing")["status"] == "True"
    assert names(cluster.pods(job)) == ["demo-a-0", "demo-svc-0"]


def test_missing_kubeedge_component_is_a_clear_condition(cluster, app, crd_validator, submit):
    controller = runtime_controller(cluster, app, crd_validator)
    job = submit(job_manifest(runtime="kubeedge", tasks=[
        task("a"), task("infer", restartPolicy="Always", placement={"nodeGroups": GROUPS})]))
    response = controller.sync(job)
    assert response["children"] == []
    progressing = condition(job, "Progressing")
    assert progressing["reason"] == "RuntimeUnavailable"
    assert progressing["message"] == (
        "the CompositeController does not manage EdgeApplication.apps.kubeedge.io/v1alpha1 (runtime kubeedge): "
        "install the component manifests/components/kubeedge")


def test_missing_components_are_all_named(cluster, app, crd_validator, submit):
    from tests.driver import Controller, FlaskTransport, load_controller

    cc = load_controller()
    cc["spec"]["childResources"] = [r for r in cc["spec"]["childResources"] if r["resource"] != "services"]
    controller = Controller(cluster, FlaskTransport(app), controller=cc)
    job = submit(job_manifest(tasks=[task("k"), task("v", runtime="volcano"),
                                     task("e", runtime="kubeedge", restartPolicy="Always",
                                          placement={"nodeGroups": GROUPS})]))
    controller.sync(job)
    assert condition(job, "Progressing")["message"] == (
        "the CompositeController does not manage Service.v1: install manifests/base; "
        "EdgeApplication.apps.kubeedge.io/v1alpha1 (runtime kubeedge): install the component "
        "manifests/components/kubeedge; Job.batch.volcano.sh/v1alpha1 (runtime volcano): install the component "
        "manifests/components/volcano")


def test_malformed_edge_application_status_is_read_defensively(controller, cluster, kubeedge, submit):
    job = submit(job_manifest(runtime="kubeedge", tasks=[
        task("infer", restartPolicy="Always", placement={"nodeGroups": GROUPS})]))
    controller.sync(job)
    app = kubeedge.application(job, "demo-infer")
    controller.validate = None
    for garbage in ("x", {"workloadStatus": "x"}, {"workloadStatus": [None, {"identifier": [1]},
                                                                      {"identifier": {"kind": "Deployment"}}]}):
        app["status"] = garbage
        response = controller.call(job)
        assert [c["kind"] for c in response["children"]] == ["EdgeApplication"]
        assert response["status"]["tasks"][0]["phase"] == "Pending"


def test_same_request_same_bytes(controller, cluster, kubelet, kubeedge, submit, client):
    job = submit(job_manifest(runtime="kubeedge", tasks=[
        task("infer", restartPolicy="Always", placement={"nodeGroups": GROUPS}), task("b", replicas=3)]))
    controller.sync(job)
    kubeedge.process(job, "demo-infer", available=("factory-2",))
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    controller.sync(job)
    assert_replay_is_byte_identical(controller, client, job)
