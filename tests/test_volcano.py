"""The volcano runtime: the generated Volcano Job, and jobs walked through the protocol driver
with Volcano played by ``tests.runtime_sims.VolcanoSim``."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml

from hooks.sync import handle, render
from tests.conftest import job_manifest, task
from tests.helpers import condition, names, phase, task_status
from tests.runtime_sims import (
    VOLCANO_JOB, VolcanoSim, assert_replay_is_byte_identical, child_errors, runtime_controller,
)
from tests.schemas import CRDValidator, reference_crd_path
from tests.test_cli_render import decice

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def controller(cluster, app, crd_validator):
    return runtime_controller(cluster, app, crd_validator, "volcano")


@pytest.fixture
def volcano(cluster) -> VolcanoSim:
    return VolcanoSim(cluster)


def volcano_job(manifest: dict) -> dict:
    (vcjob,) = [c for c in render(manifest, NOW) if c["kind"] == "Job"]
    return vcjob


def vc_task(vcjob: dict, name: str) -> dict:
    return next(t for t in vcjob["spec"]["tasks"] if t["name"] == name)


RICH = job_manifest(
    name="hpc", runtime="volcano", queue="hpc", priorityClassName="high", backoffLimit=2,
    schedulerName="custom-scheduler", ttlSecondsAfterFinished=600,
    volumes=[{"name": "work", "size": "1Gi"}, {"name": "ref", "existingClaim": "reference-data"}],
    tasks=[
        task("prep", volumeMounts=[{"volume": "work", "mountPath": "/work"},
                                   {"volume": "ref", "mountPath": "/ref", "readOnly": True}]),
        task("solver", replicas=4, dependsOn=["prep"], restartPolicy="OnFailure",
             resources={"cpu": "4", "memory": "8Gi", "gpu": 1}, ports=[{"containerPort": 2222, "name": "ssh"}],
             placement={"nodes": ["hpc-1", "hpc-2"], "tolerations": [{"key": "hpc", "operator": "Exists"}]},
             volumeMounts=[{"volume": "work", "mountPath": "/work"}], labels={"team": "cfd"}),
        task("report", runtime="kubernetes", dependsOn=["solver"]),
    ],
)


def test_generated_volcano_job_validates_against_the_reference_crd():
    crd = CRDValidator.from_file(reference_crd_path("volcano", "batch.volcano.sh_jobs.yaml"))
    vcjob = volcano_job(RICH)
    assert crd.errors(vcjob) == []
    assert child_errors(vcjob) == []


def test_volcano_job_fields():
    vcjob = volcano_job(RICH)
    assert vcjob["metadata"] == {
        "name": "hpc-vc", "namespace": "team-a",
        "labels": {"dev.decice.com/job-name": "hpc", "app.kubernetes.io/managed-by": "decice-hooks"},
    }
    spec = vcjob["spec"]
    assert (spec["schedulerName"], spec["queue"], spec["priorityClassName"]) == ("volcano", "hpc", "high")
    assert spec["maxRetry"] == 3, "backoffLimit 2: the third failure exhausts Volcano's restarts"
    assert spec["policies"] == [{"event": "PodEvicted", "action": "RestartJob"},
                                {"event": "PodFailed", "action": "RestartJob"}]
    assert spec["plugins"] == {"env": [], "svc": ["--publish-not-ready-addresses=true",
                                                  "--disable-network-policy=true"]}
    assert "ttlSecondsAfterFinished" not in spec, "the hooks remove the Volcano Job at the DeciceJob's TTL"
    assert [t["name"] for t in spec["tasks"]] == ["prep", "solver"], "only the volcano tasks"
    solver = vc_task(vcjob, "solver")
    assert solver["dependsOn"] == {"name": ["prep"]}
    assert (solver["replicas"], solver["minAvailable"], solver["maxRetry"]) == (4, 4, 3)
    assert solver["policies"] == [{"event": "TaskFailed", "action": "TerminateJob"}]
    assert "policies" not in vc_task(vcjob, "prep"), "restart limits in place only for OnFailure tasks"


def test_pod_templates_come_from_the_shared_builder():
    from hooks.model import parse_job
    from hooks.podtemplate import job_env, pod_template

    job = parse_job(RICH)
    solver = job.spec.task("solver")
    template = vc_task(volcano_job(RICH), "solver")["template"]
    shared = pod_template(job, solver)
    assert template["metadata"] == shared["metadata"]
    container = template["spec"]["containers"][0]
    assert container["env"][0] == {"name": "DECICE_TASK_INDEX",
                                   "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['volcano.sh/task-index']"}}}
    assert container["env"][1:] == job_env(job, solver)
    assert container["resources"] == shared["spec"]["containers"][0]["resources"]
    assert "schedulerName" not in template["spec"], "Volcano's scheduler runs the gang, whatever spec.schedulerName"
    assert template["spec"]["tolerations"] == [{"key": "hpc", "operator": "Exists"}]
    assert template["metadata"]["labels"]["team"] == "cfd"


def test_volumes_volcano_mounts_itself_and_per_task_ones():
    vcjob = volcano_job(RICH)
    assert vcjob["spec"]["volumes"] == [{"mountPath": "/work", "volumeClaimName": "hpc-work"}]
    prep = vc_task(vcjob, "prep")["template"]["spec"]
    assert prep["volumes"] == [{"name": "ref", "persistentVolumeClaim": {"claimName": "reference-data"}}]
    assert prep["containers"][0]["volumeMounts"] == [{"name": "ref", "mountPath": "/ref", "readOnly": True}]
    solver = vc_task(vcjob, "solver")["template"]["spec"]
    assert "volumes" not in solver and "volumeMounts" not in solver["containers"][0]

    different_paths = job_manifest(runtime="volcano", volumes=[{"name": "w", "size": "1Gi"}], tasks=[
        task("a", volumeMounts=[{"volume": "w", "mountPath": "/a"}]),
        task("b", volumeMounts=[{"volume": "w", "mountPath": "/b", "subPath": "b"}])])
    vcjob = volcano_job(different_paths)
    assert "volumes" not in vcjob["spec"], "per-task paths cannot be one Volcano job volume"
    assert vc_task(vcjob, "b")["template"]["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "w", "mountPath": "/b", "subPath": "b"}]


def test_gang_size():
    plain = job_manifest(runtime="volcano", tasks=[task("a", replicas=2), task("b", replicas=3)])
    assert volcano_job(plain)["spec"]["minAvailable"] == 5, "default: every replica"
    assert volcano_job(dict(plain, spec={**plain["spec"], "minAvailable": 2}))["spec"]["minAvailable"] == 2
    staged = job_manifest(runtime="volcano", minAvailable=5,
                          tasks=[task("a", replicas=2), task("b", replicas=3, dependsOn=["a"])])
    assert volcano_job(staged)["spec"]["minAvailable"] == 2, "b's pods cannot exist before a succeeded"
    mixed = job_manifest(tasks=[task("k", replicas=4), task("v", runtime="volcano", replicas=2)], minAvailable=6)
    assert volcano_job(mixed)["spec"]["minAvailable"] == 2, "capped at the volcano replicas"


def test_batch_dependencies_never_report_ready():
    vcjob = volcano_job(job_manifest(runtime="volcano", tasks=[
        task("db", restartPolicy="Always"), task("load"), task("query", dependsOn=["db", "load"])]))
    probe = vc_task(vcjob, "load")["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe == {"exec": {"command": ["false"]}, "initialDelaySeconds": 2147483647}
    assert "readinessProbe" not in vc_task(vcjob, "db")["template"]["spec"]["containers"][0], \
        "a service dependency is met when it runs ready"
    assert "readinessProbe" not in vc_task(vcjob, "query")["template"]["spec"]["containers"][0]


def test_placement_is_the_node_set():
    vcjob = volcano_job(job_manifest(runtime="volcano", tasks=[
        task("spread", replicas=4, placement={"nodes": ["n1", "n2", "n3"], "nodeSelector": {"arch": "x86"}}),
        task("packed", replicas=3, placement={"nodes": ["n1", "n1", "n2"]})]))
    spread = vc_task(vcjob, "spread")["template"]["spec"]
    terms = spread["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                            "values": ["n1", "n2", "n3"]}]}]
    assert spread["nodeSelector"] == {"arch": "x86"}
    assert spread["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"dev.decice.com/job-name": "demo", "dev.decice.com/task-name": "spread"}}}]
    packed = vc_task(vcjob, "packed")["template"]["spec"]
    assert packed["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["n1", "n2"]
    assert "topologySpreadConstraints" not in packed, "a repeated node asks for uneven counts: only the set"


def test_render_volcano_job_through_the_cli(tmp_path):
    path = tmp_path / "hpc.yaml"
    path.write_text(yaml.safe_dump(RICH))
    result = decice("render", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr
    children = json.loads(result.stdout)
    assert [(c["kind"], c["metadata"]["name"]) for c in children] == [
        ("Service", "hpc"), ("PersistentVolumeClaim", "hpc-work"), ("Job", "hpc-vc")]
    assert all(child_errors(c) == [] for c in children)


def test_render_is_the_first_sync():
    parent = dict(RICH, metadata={**RICH["metadata"], "uid": "", "generation": 0})
    empty = {"Pod.v1": {}, "Service.v1": {}, "PersistentVolumeClaim.v1": {}, VOLCANO_JOB: {}}
    assert render(RICH, NOW) == handle({"parent": parent, "children": empty}, NOW)["children"]


# --- lifecycle through the protocol driver ---------------------------------------------------------


def test_volcano_job_runs_to_success_and_goes_at_ttl(controller, cluster, volcano, submit, clock):
    job = submit(job_manifest(runtime="volcano", ttlSecondsAfterFinished=60,
                              tasks=[task("a", replicas=2), task("b", replicas=3)]))
    controller.sync(job)
    assert names(cluster.children_of(job, VOLCANO_JOB)) == ["demo-vc"]
    assert cluster.pods(job) == [] and cluster.children_of(job, "Service.v1") == [], "Volcano owns the pods"
    assert phase(job) == "Pending"
    assert [task_status(job, t)["phase"] for t in "ab"] == ["Pending", "Pending"]

    volcano.admit(job)
    volcano.sync(job)
    controller.sync(job)
    assert task_status(job, "a")["pending"] == 2 and phase(job) == "Pending"

    volcano.run(job)
    controller.sync(job)
    assert phase(job) == "Running"
    a = task_status(job, "a")
    assert (a["phase"], a["running"], a["ready"], a["runtime"]) == ("Running", 2, 2, "volcano")

    volcano.succeed(job, "a")
    controller.sync(job)
    assert task_status(job, "a")["phase"] == "Succeeded" and phase(job) == "Running"
    volcano.succeed(job, "b")
    response = controller.sync(job)
    assert volcano.job(job)["status"]["state"]["phase"] == "Completed"
    assert phase(job) == "Succeeded" and condition(job, "Complete")["status"] == "True"
    assert names(cluster.children_of(job, VOLCANO_JOB)) == ["demo-vc"], "kept until the TTL"
    assert response["resyncAfterSeconds"] == 60

    clock.advance(60)
    controller.sync(job)
    assert cluster.children_of(job, VOLCANO_JOB) == []
    assert phase(job) == "Succeeded"
    assert task_status(job, "b")["succeeded"] == 3, "counts latched when the Volcano Job goes"


def test_dependency_inside_the_volcano_job_waits_for_success(controller, cluster, volcano, submit):
    job = submit(job_manifest(runtime="volcano", tasks=[task("prep"), task("train", replicas=2, dependsOn=["prep"])]))
    controller.sync(job)
    assert task_status(job, "train")["phase"] == "Waiting"
    assert volcano.job(job)["spec"]["minAvailable"] == 1
    volcano.run(job)
    controller.sync(job)
    train = task_status(job, "train")
    assert train["phase"] == "Waiting", "prep runs but has not succeeded"
    assert train["message"] == "Volcano starts it once prep succeeded"
    assert task_status(job, "prep")["phase"] == "Running"

    volcano.succeed(job, "prep")
    volcano.run(job)
    controller.sync(job)
    assert task_status(job, "train")["running"] == 2
    volcano.succeed(job, "train")
    controller.sync(job)
    assert phase(job) == "Succeeded"


def test_kubernetes_task_waits_for_volcano_task(controller, cluster, kubelet, volcano, submit):
    job = submit(job_manifest(tasks=[task("solve", runtime="volcano", replicas=2), task("report", dependsOn=["solve"])]))
    controller.sync(job)
    assert cluster.pods(job) == [] and task_status(job, "report")["phase"] == "Waiting"
    volcano.run(job)
    controller.sync(job)
    assert cluster.pods(job) == [], "the volcano task runs but has not succeeded"
    volcano.succeed(job, "solve")
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-report-0"]
    kubelet.succeed(cluster.pod(job, "demo-report-0"))
    controller.sync(job)
    assert phase(job) == "Succeeded"


def test_kubernetes_task_waits_for_volcano_service_to_run(controller, cluster, volcano, submit):
    job = submit(job_manifest(tasks=[task("server", runtime="volcano", replicas=2, restartPolicy="Always"),
                                     task("client", dependsOn=["server"])]))
    controller.sync(job)
    volcano.sync(job)
    controller.sync(job)
    assert cluster.pods(job) == []
    volcano.run(job)
    controller.sync(job)
    assert names(cluster.pods(job)) == ["demo-client-0"], "a running Volcano service counts as ready"


def test_volcano_job_waits_for_dependencies_outside_it(controller, cluster, kubelet, volcano, submit):
    job = submit(job_manifest(tasks=[
        task("fetch"),
        task("solve", runtime="volcano", dependsOn=["fetch"]),
        task("check", runtime="volcano"),
        task("post", runtime="volcano", dependsOn=["solve"]),
    ]))
    controller.sync(job)
    assert cluster.children_of(job, VOLCANO_JOB) == [], "solve's dependency on fetch holds back the whole Job"
    assert [task_status(job, t)["phase"] for t in ("solve", "check", "post")] == ["Waiting"] * 3
    kubelet.run(cluster.pod(job, "demo-fetch-0"))
    controller.sync(job)
    assert cluster.children_of(job, VOLCANO_JOB) == []
    kubelet.succeed(cluster.pod(job, "demo-fetch-0"))
    controller.sync(job)
    vcjob = volcano.job(job)
    assert [t["name"] for t in vcjob["spec"]["tasks"]] == ["solve", "check", "post"]
    assert "dependsOn" not in vc_task(vcjob, "solve"), "fetch is not in the Volcano Job: the hooks gated it"
    assert vc_task(vcjob, "post")["dependsOn"] == {"name": ["solve"]}
    assert [task_status(job, t)["phase"] for t in ("solve", "check", "post")] == ["Pending", "Pending", "Waiting"]


def test_a_task_between_two_volcano_tasks_is_an_invalid_spec(controller, cluster, submit):
    job = submit(job_manifest(tasks=[task("a", runtime="volcano"), task("k", dependsOn=["a"]),
                                     task("b", runtime="volcano", dependsOn=["k"])]))
    response = controller.sync(job)
    assert response["children"] == []
    invalid = condition(job, "InvalidSpec")
    assert invalid["status"] == "True"
    assert "(volcano tasks) -> k -> (volcano tasks)" in invalid["message"]


def test_indirect_paths_through_another_runtime_are_refused_too(tmp_path):
    from hooks.model import InvalidSpec, parse_job

    sandwich = job_manifest(tasks=[task("a", runtime="volcano"), task("k1", dependsOn=["a"]),
                                   task("k2", runtime="kubeedge", dependsOn=["k1"]),
                                   task("b", runtime="volcano", dependsOn=["k2"])])
    with pytest.raises(InvalidSpec, match=r"\(volcano tasks\) -> k2 -> k1 -> \(volcano tasks\)"):
        parse_job(sandwich)
    path = tmp_path / "sandwich.yaml"
    path.write_text(yaml.safe_dump(sandwich))
    assert decice("render", str(path)).returncode == 2
    fan_in = job_manifest(tasks=[task("a", runtime="volcano"), task("k", dependsOn=["a"]),
                                 task("b", runtime="volcano"), task("z", dependsOn=["k", "b"])])
    assert parse_job(fan_in).spec.task("z").depends_on == ("k", "b"), "no volcano task waits for k: valid"


def test_failed_pods_restart_the_job_until_max_retry(controller, cluster, volcano, submit, clock):
    job = submit(job_manifest(runtime="volcano", backoffLimit=1, ttlSecondsAfterFinished=300,
                              tasks=[task("a", replicas=2)]))
    controller.sync(job)
    volcano.admit(job)
    volcano.run(job)
    volcano.fail(job, "a", 1)
    controller.sync(job)
    assert phase(job) == "Pending"
    a = task_status(job, "a")
    assert a["message"] == "Volcano Job demo-vc Restarting (PodFailed): pod a-1: PodFailed; restarted 1 time"
    assert condition(job, "Failed")["status"] == "False", "one failure is within backoffLimit 1"

    volcano.run(job)
    controller.sync(job)
    assert phase(job) == "Running"
    volcano.fail(job, "a", 0)
    controller.sync(job)
    assert phase(job) == "Failed"
    failed = condition(job, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "restarted 2 times" in failed["message"]
    assert task_status(job, "a")["phase"] == "Failed"
    assert names(cluster.children_of(job, VOLCANO_JOB)) == ["demo-vc"], "a finished Volcano Job stays until the TTL"
    clock.advance(300)
    controller.sync(job)
    assert cluster.children_of(job, VOLCANO_JOB) == []
    assert phase(job) == "Failed"


def test_eviction_restarts_the_job(controller, cluster, volcano, submit):
    job = submit(job_manifest(runtime="volcano", tasks=[task("a", replicas=2)]))
    controller.sync(job)
    volcano.run(job)
    volcano.fail(job, "a", 0, event="PodEvicted")
    controller.sync(job)
    assert phase(job) in ("Pending", "Running") and "PodEvicted" in task_status(job, "a")["message"]
    volcano.run(job)
    volcano.succeed(job, "a")
    controller.sync(job)
    assert phase(job) == "Succeeded"


def test_crash_looping_on_failure_task_terminates_the_job(controller, cluster, volcano, submit):
    job = submit(job_manifest(runtime="volcano", backoffLimit=2,
                              tasks=[task("a", restartPolicy="OnFailure"), task("b", replicas=2)]))
    controller.sync(job)
    volcano.run(job)
    volcano.crash_loop(job, "a", restarts=2)
    controller.sync(job)
    assert phase(job) == "Running"
    volcano.crash_loop(job, "a", restarts=3)
    controller.sync(job)
    assert phase(job) == "Failed"
    assert condition(job, "Failed")["reason"] == "VolcanoJobTerminated"
    assert [task_status(job, t)["phase"] for t in "ab"] == ["Failed", "Failed"]


def test_failing_kubernetes_task_stops_the_running_volcano_job(controller, cluster, kubelet, volcano, submit):
    job = submit(job_manifest(backoffLimit=0, tasks=[task("k"), task("v", runtime="volcano")]))
    controller.sync(job)
    volcano.run(job)
    kubelet.fail(cluster.pod(job, "demo-k-0"))
    controller.sync(job)
    assert phase(job) == "Failed" and condition(job, "Failed")["reason"] == "BackoffLimitExceeded"
    assert cluster.children_of(job, VOLCANO_JOB) == [], "an active Volcano Job is stopped when the job fails"


def test_active_deadline_stops_the_volcano_job(controller, cluster, volcano, submit, clock):
    job = submit(job_manifest(runtime="volcano", activeDeadlineSeconds=100))
    controller.sync(job)
    volcano.run(job)
    clock.advance(100)
    controller.sync(job)
    assert condition(job, "Failed")["reason"] == "DeadlineExceeded"
    assert cluster.children_of(job, VOLCANO_JOB) == []


def test_suspend_deletes_an_active_volcano_job_and_resume_recreates_it(controller, cluster, volcano, submit):
    job = submit(job_manifest(runtime="volcano", tasks=[task("a", replicas=2)]))
    controller.sync(job)
    volcano.run(job)
    controller.sync(job)
    first_uid = volcano.job(job)["metadata"]["uid"]
    cluster.update_job_spec(job, dict(job["spec"], suspend=True))
    controller.sync(job)
    assert phase(job) == "Suspended" and cluster.children_of(job, VOLCANO_JOB) == []
    cluster.update_job_spec(job, dict(job["spec"], suspend=False))
    controller.sync(job)
    assert phase(job) == "Pending"
    assert volcano.job(job)["metadata"]["uid"] != first_uid, "a fresh gang"


def test_a_completed_volcano_job_is_kept_while_the_job_is_suspended(controller, cluster, kubelet, volcano, submit):
    job = submit(job_manifest(tasks=[task("v", runtime="volcano"), task("k")]))
    controller.sync(job)
    volcano.run(job)
    volcano.succeed(job, "v")
    cluster.update_job_spec(job, dict(job["spec"], suspend=True))
    controller.sync(job)
    assert names(cluster.children_of(job, VOLCANO_JOB)) == ["demo-vc"], "finished work is not thrown away"
    cluster.update_job_spec(job, dict(job["spec"], suspend=False))
    controller.sync(job)
    assert task_status(job, "v")["phase"] == "Succeeded"
    kubelet.succeed(cluster.pod(job, "demo-k-0"))
    controller.sync(job)
    assert phase(job) == "Succeeded"


def test_spec_edits_do_not_touch_an_existing_volcano_job(controller, cluster, volcano, submit):
    job = submit(job_manifest(runtime="volcano", tasks=[task("a", replicas=2)]))
    controller.sync(job)
    before = json.dumps(volcano.job(job)["spec"], sort_keys=True)
    cluster.update_job_spec(job, {"runtime": "volcano", "tasks": [task("a", replicas=3, image="registry.example/a:2")]})
    controller.sync(job)
    assert json.dumps(volcano.job(job)["spec"], sort_keys=True) == before, "OnDelete: Volcano refuses such updates"
    assert controller.managed_keys()[VOLCANO_JOB]["updateStrategy"] == {"method": "OnDelete"}

    cluster.update_job_spec(job, {"runtime": "volcano", "tasks": [task("a", replicas=2), task("b")]})
    controller.sync(job)
    assert task_status(job, "b")["message"] == (
        "not in Volcano Job demo-vc, created before the task was added: suspend and resume the job to recreate it")
    cluster.update_job_spec(job, dict(job["spec"], suspend=True))
    controller.sync(job)
    cluster.update_job_spec(job, dict(job["spec"], suspend=False))
    controller.sync(job)
    assert [t["name"] for t in volcano.job(job)["spec"]["tasks"]] == ["a", "b"]
    assert "message" not in task_status(job, "b")


def test_finalize_removes_the_volcano_job_first(controller, cluster, volcano, submit):
    job = submit(job_manifest(runtime="volcano", volumes=[{"name": "d", "size": "1Gi"}],
                              tasks=[task("a", volumeMounts=[{"volume": "d", "mountPath": "/d"}])]))
    controller.sync(job)
    volcano.run(job)
    controller.delete_job(job)
    response = controller.sync(job)
    assert response["finalized"] is False
    assert cluster.children_of(job, VOLCANO_JOB) == []
    assert names(cluster.children_of(job, "PersistentVolumeClaim.v1")) == ["demo-d"]
    response = controller.sync(job)
    assert response["finalized"] is True


def test_missing_volcano_component_is_a_clear_condition(cluster, app, crd_validator, submit):
    controller = runtime_controller(cluster, app, crd_validator)
    job = submit(job_manifest(runtime="volcano"))
    response = controller.sync(job)
    assert response["children"] == []
    progressing = condition(job, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "RuntimeUnavailable")
    assert progressing["message"] == (
        "the CompositeController does not manage Job.batch.volcano.sh/v1alpha1 (runtime volcano): "
        "install the component manifests/components/volcano")


def test_malformed_volcano_status_is_read_defensively(controller, cluster, volcano, submit):
    job = submit(job_manifest(runtime="volcano", tasks=[task("a", replicas=2)]))
    controller.sync(job)
    vcjob = volcano.job(job)
    for garbage in ({"state": "x", "taskStatusCount": [1]}, {"taskStatusCount": {"a": {"phase": {"Running": "two"}}}},
                    {"state": {"phase": 7}, "retryCount": -1, "taskStatusCount": {"a": None}}):
        vcjob["status"] = garbage
        controller.validate = None
        response = controller.call(job)
        assert [c["kind"] for c in response["children"]] == ["Job"], "the Volcano Job is kept"
        assert response["status"]["phase"] == "Pending"


def test_same_request_same_bytes(controller, cluster, volcano, submit, client):
    job = submit(job_manifest(tasks=[task("v", runtime="volcano", replicas=3, dependsOn=["k"]), task("k"),
                                     task("w", runtime="volcano", dependsOn=["v"])]))
    controller.sync(job)
    for pod in cluster.pods(job):
        pod["status"]["phase"] = "Succeeded"
    controller.sync(job)
    volcano.run(job)
    controller.sync(job)
    controller.sync(job)
    assert_replay_is_byte_identical(controller, client, job)
