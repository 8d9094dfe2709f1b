"""The policy guard: forbidden children are refused with a condition, never generated."""

from __future__ import annotations

import copy

import pytest

from hooks import config, guard
from hooks.app import create_app
from hooks.model import InvalidSpec, parse_job
from hooks.policy import Policy
from hooks.sync import render
from hooks.timeutil import utc_now
from tests.conftest import job_manifest, task
from tests.driver import Controller, FlaskTransport
from tests.helpers import condition, names, phase
from tests.schemas import builtin_errors

JOB = parse_job(job_manifest())
MANAGED = frozenset({"Pod.v1", "Service.v1", "PersistentVolumeClaim.v1"})


def pod(**spec_fields) -> dict:
    spec = {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec_fields}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "demo-main-0", "namespace": "team-a"},
            "spec": spec}


def container(**fields) -> dict:
    return {"name": "main", "image": "busybox:1.36", **fields}


def problems(children, policy=Policy(), managed=MANAGED) -> list[str]:
    try:
        guard.enforce(JOB, children, managed, policy)
    except guard.PolicyViolation as exc:
        return exc.errors
    return []


def test_plain_children_pass():
    assert problems([pod(), {"apiVersion": "v1", "kind": "Service",
                             "metadata": {"name": "demo", "namespace": "team-a"}, "spec": {}}]) == []


@pytest.mark.parametrize("child, fragment", [
    (pod(hostNetwork=True), "hostNetwork is set"),
    (pod(hostPID=True), "hostPID is set"),
    (pod(hostIPC=True), "hostIPC is set"),
    (pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "volume 'root' is a hostPath volume"),
    (pod(containers=[container(securityContext={"privileged": True})]), "container 'main' is privileged"),
    (pod(containers=[container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})]),
     "container 'main' adds capabilities ['SYS_ADMIN']"),
    (pod(initContainers=[container(name="init", securityContext={"privileged": True})]),
     "container 'init' is privileged"),
    (pod(containers=[container(ports=[{"containerPort": 80, "hostPort": 80}])]), "uses host port 80"),
    (pod(containers=[container(securityContext={"windowsOptions": {"hostProcess": True}})]), "Windows host process"),
])
def test_privileged_pods_are_refused_unless_allowed(child, fragment):
    (problem,) = problems([child])
    assert problem.startswith("Pod demo-main-0: ") and fragment in problem
    assert problems([child], Policy(allow_privileged=True)) == []


def test_dropping_capabilities_is_fine():
    assert problems([pod(containers=[container(securityContext={"capabilities": {"drop": ["ALL"]},
                                                                "privileged": False})])]) == []


def test_children_outside_the_namespace_are_refused_whatever_the_policy():
    child = pod()
    child["metadata"]["namespace"] = "kube-system"
    (problem,) = problems([child], Policy(allow_privileged=True, allowed_service_accounts=frozenset({"*"})))
    assert "namespace 'kube-system' is not the job's namespace 'team-a'" in problem
    del child["metadata"]["namespace"]
    assert problems([child])


def test_only_managed_kinds():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "demo", "namespace": "team-a"}, "spec": {}}
    assert problems([job, copy.deepcopy(job)]) == ["kind Job.batch/v1 is not managed by the CompositeController"]
    assert problems([job], managed=None) == []


def test_pod_templates_nested_in_other_kinds_are_checked():
    template = {"spec": {"containers": [container(securityContext={"privileged": True})],
                         "serviceAccountName": "root-ish"}}
    volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": "demo-volcano", "namespace": "team-a"},
               "spec": {"tasks": [{"name": "a", "template": template}]}}
    found = problems([volcano], managed=None)
    assert found == [
        "Job demo-volcano: service account 'root-ish' is not allowed (spec.tasks[0].template.spec)",
        "Job demo-volcano: container 'main' is privileged (spec.tasks[0].template.spec)",
    ]


@pytest.mark.parametrize("allowed, account, ok", [
    ((), "default", True),
    ((), "builder", False),
    (("builder",), "builder", True),
    (("team-a/builder",), "builder", True),
    (("team-b/builder",), "builder", False),
    (("*",), "anything", True),
])
def test_service_accounts(allowed, account, ok):
    policy = Policy(allowed_service_accounts=frozenset(allowed))
    assert (problems([pod(serviceAccountName=account)], policy) == []) is ok
    assert (problems([pod(serviceAccount=account)], policy) == []) is ok


def test_many_problems_are_summarised():
    children = [pod(hostNetwork=True) for _ in range(12)]
    found = problems(children)
    assert len(found) == guard.MAX_REPORTED + 1 and found[-1] == "and 7 more"


# --- through the hook ---------------------------------------------------------------------------


def settings_with(**env: str):
    return config.load([], {f"DECICE_HOOKS_{k.upper()}": v for k, v in env.items()})


def test_service_account_refused_by_default_through_the_protocol(controller, cluster, submit):
    job = submit(job_manifest(tasks=[task("a", serviceAccountName="builder")]))
    controller.sync(job)
    assert cluster.pods(job) == [] and phase(job) == "Pending"
    progressing = condition(job, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "PolicyViolation")
    assert "service account 'builder' is not allowed" in progressing["message"]
    assert condition(job, "InvalidSpec")["status"] == "False"


def test_refusal_keeps_every_observed_child(controller, cluster, submit, kubelet):
    job = submit(job_manifest(tasks=[task("a", replicas=2)]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    before = names(cluster.pods(job))
    job["spec"]["tasks"][0]["serviceAccountName"] = "builder"
    job["metadata"]["generation"] += 1
    controller.sync(job)
    assert names(cluster.pods(job)) == before
    assert phase(job) == "Running" and condition(job, "Progressing")["reason"] == "PolicyViolation"
    assert job["status"]["observedGeneration"] == job["metadata"]["generation"]
    job["spec"]["tasks"][0].pop("serviceAccountName")
    job["metadata"]["generation"] += 1
    controller.sync(job)
    assert condition(job, "Progressing")["reason"] == "TasksProgressing"


def test_allowed_service_account_reaches_the_pod(cluster, submit, crd_validator, clock):
    app = create_app(clock=clock, settings=settings_with(allowed_service_accounts="team-a/builder"))
    controller = Controller(cluster, FlaskTransport(app))
    manifest = job_manifest(tasks=[task("a", serviceAccountName="builder")])
    assert crd_validator.errors(manifest) == []
    job = submit(manifest)
    controller.sync(job)
    (pod_object,) = cluster.pods(job)
    assert pod_object["spec"]["serviceAccountName"] == "builder"
    assert builtin_errors(pod_object) == []


def test_service_account_name_is_validated(crd_validator):
    manifest = job_manifest(tasks=[task("a", serviceAccountName="Not_Valid")])
    assert crd_validator.errors(manifest)
    with pytest.raises(InvalidSpec, match="serviceAccountName"):
        parse_job(manifest)


def test_render_refuses_what_the_hook_would_refuse():
    with pytest.raises(guard.PolicyViolation, match="service account 'builder' is not allowed"):
        render(job_manifest(tasks=[task("a", serviceAccountName="builder")]), utc_now())
    children = render(job_manifest(tasks=[task("a", serviceAccountName="builder")]), utc_now(),
                      Policy(allowed_service_accounts=frozenset({"builder"})))
    assert [c["spec"].get("serviceAccountName") for c in children if c["kind"] == "Pod"] == ["builder"]
