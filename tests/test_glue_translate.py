"""``glue.translate``: DECICE workflows into DeciceJobs, field by field, and what it refuses."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from glue import InvalidInput, InvalidWorkflow, UnsupportedWorkflow, translate
from glue.naming import DISPLAY_NAME, TASK_ID, USER_ID, WORK_MOUNT_PATH, WORKFLOW_ID
from hooks import names
from hooks.model import GPU_RESOURCE, parse_job
from tests.driver import ROOT

WORKFLOW_ID_VALUE = "7d3f2a10-0000-4000-8000-00000000beef"


def uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def wf_task(n: int, name: str | None = None, type: str = "job", **fields: Any) -> dict:
    """A DECICE task with id ``uid(n)``, the way the framework serialises it (unused fields null)."""
    return {"id": uid(n), "name": name if name is not None else f"task-{n}", "type": type,
            "image": f"registry.example/t{n}:1", "command_str": None, "required_cpu": None,
            "required_memory": None, "required_gpu": None, "annotations": {}, "env": [], "labels": {},
            "dependencies": [], **fields}


def workflow(*tasks: dict, name: str = "Demo Workflow", **fields: Any) -> dict:
    return {"id": WORKFLOW_ID_VALUE, "name": name, "status": "PROGRESSING", "user_id": uid(999),
            "annotations": {}, "tasks": list(tasks) or [wf_task(1)], **fields}


@pytest.fixture
def check(crd_validator):
    """translate(), then prove the result is a DeciceJob the API server and the hooks accept."""

    def run(wf: dict, schedule: dict | None = None, **kwargs: Any) -> dict:
        manifest = translate(wf, schedule, **kwargs)
        assert crd_validator.errors(manifest) == []
        job = parse_job(manifest)
        assert len(job.name) <= names.JOB_NAME_MAX and re.match(names.DNS_LABEL_PATTERN, job.name)
        for t in job.spec.tasks:
            assert len(t.name) <= names.TASK_NAME_MAX and re.match(names.DNS_LABEL_PATTERN, t.name)
            assert len(job.name) + len(t.name) <= names.JOB_AND_TASK_NAME_MAX
        return manifest

    return run


def spec_task(manifest: dict, index: int = 0) -> dict:
    return manifest["spec"]["tasks"][index]


def refused(wf: dict, schedule: dict | None = None, kind: type[Exception] = InvalidWorkflow) -> list[str]:
    with pytest.raises(kind) as info:
        translate(wf, schedule)
    return info.value.errors


# --- task types ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "expected"), [
    ("job", {"restartPolicy": "Never", "replicas": 1}),
    ("deployment", {"restartPolicy": "Always", "replicas": 3}),
    ("hpc_job", {"restartPolicy": "Never", "replicas": 1, "runtime": "volcano"}),
])
def test_task_types(check, kind, expected):
    extra = {"replicas": 3} if kind == "deployment" else {}
    task = spec_task(check(workflow(wf_task(1, type=kind, **extra))))
    assert {k: task.get(k) for k in expected} == expected
    if kind != "hpc_job":
        assert "runtime" not in task, "kubernetes is the default runtime"


def test_hpc_context_sets_the_working_dir_of_hpc_tasks(check):
    manifest = check(workflow(wf_task(1, type="hpc_job"), wf_task(2),
                              hpc_context={"platform_username": "alice", "default_working_dir": "/scratch/alice"}))
    assert spec_task(manifest, 0)["workingDir"] == "/scratch/alice"
    assert "workingDir" not in spec_task(manifest, 1)
    assert manifest["metadata"]["annotations"]["dev.decice.com/hpc-platform-username"] == "alice"


def test_k8s_resource_tasks_are_refused_by_field():
    errors = refused(workflow(wf_task(1), wf_task(2, "crd", type="k8s_resource")), kind=UnsupportedWorkflow)
    assert len(errors) == 1 and errors[0].startswith("tasks[1].type: k8s_resource tasks are not supported")
    assert uid(2) in errors[0] and "'crd'" in errors[0]


def test_a_dependency_on_a_k8s_resource_task_is_refused_too():
    errors = refused(workflow(wf_task(1, type="k8s_resource"), wf_task(2, dependencies=[uid(1)])),
                     kind=UnsupportedWorkflow)
    assert [e.split(":")[0] for e in errors] == ["tasks[0].type", "tasks[1].dependencies[0]"]


# --- placements, dependencies, storage ------------------------------------------------------


def test_placements_become_nodes(check):
    schedule = {"placements": [{"task_id": uid(2), "target_node_ids": ["edge-1", "edge-2.example"]}]}
    manifest = check(workflow(wf_task(1), wf_task(2, type="deployment", replicas=2)), schedule)
    assert "placement" not in spec_task(manifest, 0)
    assert spec_task(manifest, 1)["placement"] == {"nodes": ["edge-1", "edge-2.example"]}
    assert parse_job(manifest).spec.tasks[1].placement.node_for(1) == "edge-2.example"


@pytest.mark.parametrize(("schedule", "field"), [
    ({"placements": [{"task_id": uid(7), "target_node_ids": ["n1"]}]}, "schedule.placements[0].task_id"),
    ({"placements": [{"task_id": uid(1), "target_node_ids": ["n1"]}, {"task_id": uid(1), "target_node_ids": ["n2"]}]},
     "schedule.placements[1].task_id"),
    ({"placements": [{"task_id": uid(1), "target_node_ids": []}]}, "schedule.placements[0].target_node_ids"),
    ({"placements": [{"task_id": uid(1), "target_node_ids": ["Not_A_Node"]}]}, "schedule.placements[0].target_node_ids[0]"),
    ({"placements": [], "workflow_id": uid(5)}, "schedule.workflow_id"),
    ({"placement": []}, "schedule.placement: Unknown field."),
])
def test_bad_schedules(schedule, field):
    errors = refused(workflow(wf_task(1)), schedule)
    assert any(e.startswith(field) for e in errors), errors


def test_dependencies_become_depends_on_by_translated_name(check):
    manifest = check(workflow(
        wf_task(1, "Prepare Data"),
        wf_task(2, "train", dependencies=[uid(1), {"id": uid(1)}]),
        wf_task(3, "report", dependencies=[uid(2), uid(1)]),
    ))
    assert [t.get("dependsOn") for t in manifest["spec"]["tasks"]] == [None, ["prepare-data"], ["train", "prepare-data"]]


@pytest.mark.parametrize(("dependencies", "field"), [
    ([uid(9)], "tasks[0].dependencies[0]: 00000000-0000-4000-8000-000000000009: no such task"),
    ([uid(1)], "tasks[0].dependencies[0]: a task cannot depend on itself"),
    ([42], "tasks[0].dependencies[0]: must be a UUID"),
])
def test_bad_dependencies(dependencies, field):
    errors = refused(workflow(wf_task(1, dependencies=dependencies)))
    assert any(e.startswith(field) for e in errors), errors


def test_a_dependency_cycle_is_refused():
    errors = refused(workflow(wf_task(1, "a", dependencies=[uid(2)]), wf_task(2, "b", dependencies=[uid(1)])))
    assert errors == ["the translated DeciceJob is invalid: spec.tasks: dependency cycle a -> b -> a"]


def test_storage_request_becomes_a_volume_every_task_mounts(check):
    wf = workflow(wf_task(1), wf_task(2, type="deployment"), wf_task(3, type="hpc_job"),
                  annotations={"dev.decice.com/storage-request": "1Gi"})
    manifest = check(wf)
    assert manifest["spec"]["volumes"] == [{"name": "work", "size": "1Gi", "accessModes": ["ReadWriteMany"]}]
    for task in manifest["spec"]["tasks"]:
        assert task["volumeMounts"] == [{"volume": "work", "mountPath": WORK_MOUNT_PATH}]
    assert manifest["metadata"]["annotations"]["dev.decice.com/storage-request"] == "1Gi"


def test_storage_options(check):
    manifest = check(workflow(annotations={"dev.decice.com/storage-request": 512,
                                           "dev.decice.com/storage-class": "fast-nfs",
                                           "dev.decice.com/storage-access-mode": "ReadWriteOnce"}))
    assert manifest["spec"]["volumes"] == [
        {"name": "work", "size": "512Mi", "accessModes": ["ReadWriteOnce"], "storageClassName": "fast-nfs"}]
    assert "volumes" not in check(workflow())


@pytest.mark.parametrize("annotations", [
    {"dev.decice.com/storage-request": "lots"},
    {"dev.decice.com/storage-request": "1Gi", "dev.decice.com/storage-access-mode": "ReadWriteSometimes"},
    {"dev.decice.com/storage-request": "1Gi", "dev.decice.com/storage-class": "Fast_NFS"},
    {"dev.decice.com/storage-class": "fast"},
])
def test_bad_storage_annotations(annotations):
    errors = refused(workflow(annotations=annotations))
    assert len(errors) == 1 and errors[0].startswith("annotations[dev.decice.com/storage-")


# --- the container ------------------------------------------------------------------------


def test_command_str_is_split_like_a_shell_would(check):
    task = spec_task(check(workflow(wf_task(1, command_str="python train.py --name 'my run' --tag=\"a b\" x\\ y"))))
    assert task["command"] == ["python", "train.py", "--name", "my run", "--tag=a b", "x y"]
    assert "args" not in task
    assert "command" not in spec_task(check(workflow(wf_task(1, command_str=""))))


@pytest.mark.parametrize(("command", "message"), [
    ("echo hi | wc -l", "shell syntax '|' is not interpreted"),
    ("make && make install", "shell syntax '&'"),
    ("echo $HOME", "shell syntax '$'"),
    ("python x.py > out.txt", "shell syntax '>'"),
    ("echo 'unterminated", "No closing quotation"),
])
def test_command_str_that_needs_a_shell_is_refused(command, message):
    errors = refused(workflow(wf_task(1, command_str=command)))
    assert len(errors) == 1 and errors[0].startswith("tasks[0].command_str: ") and message in errors[0]


def test_quoted_shell_syntax_is_passed_on(check):
    task = spec_task(check(workflow(wf_task(1, command_str='sh -c "echo $HOME | wc -c; date"'))))
    assert task["command"] == ["sh", "-c", "echo $HOME | wc -c; date"]


def test_resources_and_gpus(check):
    task = spec_task(check(workflow(wf_task(1, required_cpu="500m", required_memory="512", required_gpu=2))))
    assert task["resources"] == {"cpu": "500m", "memory": "512Mi", "gpu": 2}
    model = parse_job(translate(workflow(wf_task(1, required_cpu=2, required_memory="4Gi", required_gpu="1"))))
    assert model.spec.tasks[0].resources.requests == {"cpu": "2", "memory": "4Gi", GPU_RESOURCE: "1"}
    assert model.spec.tasks[0].resources.limits == model.spec.tasks[0].resources.requests
    assert "resources" not in spec_task(check(workflow(wf_task(1, required_gpu=0))))


@pytest.mark.parametrize(("fields", "field"), [
    ({"required_memory": "4GB"}, "tasks[0].required_memory"),
    ({"required_cpu": "two"}, "tasks[0].required_cpu"),
    ({"required_gpu": -1}, "tasks[0].required_gpu"),
    ({"required_gpu": 1.5}, "tasks[0].required_gpu"),
    ({"image": None}, "tasks[0].image: required for job tasks"),
    ({"replicas": 0}, "tasks[0].replicas"),
])
def test_bad_task_fields(fields, field):
    errors = refused(workflow(wf_task(1, **fields)))
    assert any(e.startswith(field) for e in errors), errors


def test_env_with_value_from_is_passed_through(check):
    env = [{"name": "PLAIN", "value": "1", "valueFrom": None},
           {"name": "TOKEN", "value": None, "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
           {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert spec_task(check(workflow(wf_task(1, env=env))))["env"] == [
        {"name": "PLAIN", "value": "1"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]


@pytest.mark.parametrize(("env", "field"), [
    ([{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}], "tasks[0].env[0]"),
    ([{"name": "X", "valueFrom": {"vaultRef": {"path": "p"}}}], "tasks[0].env[0].valueFrom"),
    ([{"name": "1 bad name", "value": "x"}], "tasks[0].env[0].name"),
    ([{"value": "x"}], "tasks[0].env[0].name"),
])
def test_bad_env(env, field):
    errors = refused(workflow(wf_task(1, env=env)))
    assert any(e.startswith(field) for e in errors), errors


# --- ids, labels, annotations ------------------------------------------------------------------


def test_decice_ids_and_names_are_kept(check):
    manifest = check(workflow(wf_task(1, "Train Model", labels={"team": "hydro", "tier": 2},
                                      annotations={"example.com/note": "first run", "retries": True})))
    meta = manifest["metadata"]
    assert meta["labels"] == {WORKFLOW_ID: WORKFLOW_ID_VALUE, USER_ID: uid(999)}
    assert meta["annotations"] == {WORKFLOW_ID: WORKFLOW_ID_VALUE, DISPLAY_NAME: "Demo Workflow", USER_ID: uid(999)}
    task = spec_task(manifest)
    assert task["labels"] == {"team": "hydro", "tier": "2", WORKFLOW_ID: WORKFLOW_ID_VALUE, TASK_ID: uid(1)}
    assert task["annotations"] == {"example.com/note": "first run", "retries": "true", TASK_ID: uid(1),
                                   DISPLAY_NAME: "Train Model"}


@pytest.mark.parametrize(("fields", "field"), [
    ({"labels": {"team": "a b"}}, "tasks[0].labels.team.value"),
    ({"labels": {"Bad Key": "x"}}, "tasks[0].labels.Bad Key.key"),
    ({"labels": {"x": {"nested": 1}}}, "tasks[0].labels.x.value"),
    ({"labels": {TASK_ID: uid(5)}}, f"tasks[0].labels[{TASK_ID}]: reserved"),
    ({"annotations": {names.LABEL_TASK: "x"}}, f"tasks[0].annotations[{names.LABEL_TASK}]: reserved"),
    ({"id": "not a uuid"}, "tasks[0].id"),
    ({"type": "batch"}, "tasks[0].type"),
    ({"required_gpus": 1}, "tasks[0].required_gpus: Unknown field."),
])
def test_bad_ids_labels_and_fields(fields, field):
    errors = refused(workflow(wf_task(1, **fields)))
    assert any(e.startswith(field) for e in errors), errors


@pytest.mark.parametrize(("wf", "field"), [
    ([], "workflow: must be an object"),
    ({"name": "x", "tasks": [wf_task(1)]}, "id: Missing data for required field."),
    ({"id": WORKFLOW_ID_VALUE, "name": "x", "tasks": []}, "tasks: Shorter than minimum length 1."),
    ({**workflow(), "annotations": {WORKFLOW_ID: "x"}}, f"annotations[{WORKFLOW_ID}]: reserved"),
    (workflow(wf_task(1), wf_task(1)), f"tasks: task id {uid(1)} is used more than once"),
    (workflow(*[wf_task(i) for i in range(65)]), "the translated DeciceJob is invalid: spec.tasks"),
])
def test_bad_workflows(wf, field):
    errors = refused(wf)
    assert any(e.startswith(field) for e in errors), errors


def test_every_problem_is_reported_at_once():
    errors = refused(workflow(wf_task(1, image=None, command_str="a | b"), wf_task(2, type="k8s_resource"),
                              wf_task(3, dependencies=[uid(8)])))
    assert [e.split(":")[0] for e in errors] == [
        "tasks[0].image", "tasks[0].command_str", "tasks[2].dependencies[0]", "tasks[1].type"]


def test_bad_namespace_argument():
    with pytest.raises(InvalidInput, match="namespace"):
        translate(workflow(), namespace="Team A")


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected"), [
    ("Train_Model", "train-model"),
    ("  Pre-process: Stage 2 ", "pre-process-stage-2"),
    ("Ünïcödé Täsk", "unicode-task"),
    ("3D render", "task-3d-render"),
])
def test_task_names_are_sanitised(check, given, expected):
    assert spec_task(check(workflow(wf_task(1, given))))["name"] == expected


def test_long_names_are_cut_to_what_the_job_name_leaves(check):
    for workflow_name in ("w", "Demo Workflow", "x" * 100):
        manifest = check(workflow(wf_task(1, "a" * 80), name=workflow_name))
        room = min(names.TASK_NAME_MAX, names.JOB_AND_TASK_NAME_MAX - len(manifest["metadata"]["name"]))
        assert spec_task(manifest)["name"] == "a" * room


@pytest.mark.parametrize("given", ["", "训练", "___", "😀"])
def test_task_names_with_nothing_left_get_a_hash_of_their_id(check, given):
    name = spec_task(check(workflow(wf_task(1, given))))["name"]
    assert re.fullmatch(r"task-[0-9a-f]{8}", name)


def test_colliding_names_are_disambiguated_stably(check):
    tasks = [wf_task(1, "Train"), wf_task(2, "train"), wf_task(3, "TRAIN!"), wf_task(4, "eval")]
    forward = [t["name"] for t in check(workflow(*tasks))["spec"]["tasks"]]
    backward = [t["name"] for t in check(workflow(*reversed(tasks)))["spec"]["tasks"]]
    assert forward == list(reversed(backward)), "a task's name does not depend on the order of the tasks"
    assert len(set(forward)) == 4 and forward[3] == "eval"
    assert all(re.fullmatch(r"train-[0-9a-f]{8}", n) for n in forward[:3])


def test_long_colliding_names(check):
    tasks = [wf_task(1, "x" * 60 + "-one"), wf_task(2, "x" * 60 + "-two")]
    first, second = (t["name"] for t in check(workflow(*tasks))["spec"]["tasks"])
    assert first != second and first.startswith("x" * 17)


@pytest.mark.parametrize(("name", "prefix"), [
    ("Flood Forecast", "flood-forecast-"),
    ("A" * 100, "a" * 15 + "-"),
    ("", "wf-"),
    ("2024 run", "wf-2024-run-"),
])
def test_job_name_is_the_workflow_name_plus_a_hash_of_its_id(check, name, prefix):
    job_name = check(workflow(name=name))["metadata"]["name"]
    assert job_name.startswith(prefix) and re.fullmatch(r"[0-9a-f]{8}", job_name[len(prefix):])


def test_two_workflows_with_one_name_get_different_jobs():
    one = translate(workflow(name="nightly"))["metadata"]["name"]
    other = translate({**workflow(name="nightly"), "id": uid(77)})["metadata"]["name"]
    assert one != other and one.startswith("nightly-") and other.startswith("nightly-")


def test_translation_is_deterministic_and_leaves_its_input_alone(check):
    wf = workflow(wf_task(1, env=[{"name": "A", "value": "1"}]), wf_task(2, dependencies=[uid(1)]),
                  annotations={"dev.decice.com/storage-request": "1Gi"})
    before = copy.deepcopy(wf)
    assert check(wf) == check(wf)
    assert wf == before


def test_the_example_workflow(check):
    wf = yaml.safe_load((ROOT / "examples" / "workflow.yaml").read_text())
    schedule = yaml.safe_load((ROOT / "examples" / "schedule.yaml").read_text())
    manifest = check(wf, schedule, namespace="hydro")
    assert manifest["metadata"]["namespace"] == "hydro"
    assert [(t["name"], t["restartPolicy"], t.get("dependsOn"), t.get("placement")) for t in manifest["spec"]["tasks"]] == [
        ("fetch-sensor-data", "Never", None, {"nodes": ["edge-gateway-1"]}),
        ("feature-store", "Always", None, None),
        ("train-model", "Never", ["fetch-sensor-data", "feature-store"], {"nodes": ["gpu-node-a"]}),
        ("evaluate", "Never", ["train-model"], None),
    ]
