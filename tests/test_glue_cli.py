"""The ``decice`` CLI's cluster and workflow commands, through its entry point, against the
API-server stand-in (kubeconfig pointing at 127.0.0.1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from glue import translate
from glue.cli import EXIT_CONFLICT, EXIT_ERROR, EXIT_FAILED, EXIT_INVALID, EXIT_NOT_FOUND, EXIT_TIMEOUT, main
from tests.apiserver import APIServer, kubeconfig, standin  # noqa: F401 (fixtures)
from tests.conftest import job_manifest
from tests.driver import ROOT
from tests.test_glue_translate import uid, wf_task, workflow

WORKFLOW = ROOT / "examples" / "workflow.yaml"
SCHEDULE = ROOT / "examples" / "schedule.yaml"


@pytest.fixture
def decice(kubeconfig: Path, capsys):
    """Run ``decice ARGS`` in-process; cluster commands get ``--kubeconfig``."""

    def run(*args: str) -> tuple[int, str, str]:
        cluster = args[0] not in ("translate", "render")
        code = main([*args, *(["--kubeconfig", str(kubeconfig)] if cluster else [])])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def write(path: Path, document: object) -> str:
    path.write_text(yaml.safe_dump(document))
    return str(path)


def one_line_error(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("decice: error: "), err
    return err


def example_name() -> str:
    return translate(yaml.safe_load(WORKFLOW.read_text()), yaml.safe_load(SCHEDULE.read_text()))["metadata"]["name"]


# --- translate (offline) -----------------------------------------------------------------------


def test_translate_prints_the_decicejob(decice):
    code, out, err = decice("translate", str(WORKFLOW), str(SCHEDULE), "-n", "hydro")
    assert code == 0 and err == ""
    expected = translate(yaml.safe_load(WORKFLOW.read_text()), yaml.safe_load(SCHEDULE.read_text()), namespace="hydro")
    assert yaml.safe_load(out) == expected
    code, out, _ = decice("translate", str(WORKFLOW), "-o", "json")
    assert code == 0 and json.loads(out)["metadata"]["namespace"] == "default"


def test_translate_refusals_exit_2_on_one_line(decice, tmp_path):
    code, out, err = decice("translate", write(tmp_path / "w.yaml", workflow(wf_task(1), wf_task(2, type="k8s_resource"))))
    assert code == EXIT_INVALID and out == ""
    assert "tasks[1].type: k8s_resource tasks are not supported" in one_line_error(err)
    code, _, err = decice("translate", write(tmp_path / "bad.yaml", workflow(wf_task(1, required_memory="4GB"))))
    assert code == EXIT_INVALID and "tasks[0].required_memory" in one_line_error(err)
    code, _, err = decice("translate", str(tmp_path / "missing.yaml"))
    assert code == EXIT_INVALID and "cannot read" in one_line_error(err)


def test_translate_does_not_import_the_kubernetes_client():
    code = ("import sys, io, contextlib; from glue.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['translate', {str(WORKFLOW)!r}])\n"
            "print('kubernetes' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.stdout.split() == ["False"], result.stderr


# --- submit --------------------------------------------------------------------------------------


def test_submit_a_workflow_then_again(decice, standin):
    name = example_name()
    code, out, _ = decice("submit", str(WORKFLOW), "--schedule", str(SCHEDULE))
    assert (code, out) == (0, f"decicejob.dev.decice.com/{name} created\n")
    assert standin.store.get("team-a", name)["spec"]["tasks"][0]["placement"] == {"nodes": ["edge-gateway-1"]}
    code, out, _ = decice("submit", str(WORKFLOW), "--schedule", str(SCHEDULE))
    assert (code, out) == (0, f"decicejob.dev.decice.com/{name} unchanged\n")


def test_submit_a_decicejob(decice, standin, tmp_path):
    code, out, _ = decice("submit", write(tmp_path / "job.yaml", job_manifest()), "-o", "json")
    assert code == 0 and json.loads(out)["metadata"]["uid"] == standin.store.get("team-a", "demo")["metadata"]["uid"]
    other = job_manifest()
    other["spec"]["backoffLimit"] = 9
    code, _, err = decice("submit", write(tmp_path / "other.yaml", other))
    assert code == EXIT_CONFLICT and "already exists with a different spec" in one_line_error(err)


def test_submit_refusals(decice, standin, tmp_path):
    job = write(tmp_path / "job.yaml", job_manifest())
    code, _, err = decice("submit", job, "--schedule", str(SCHEDULE))
    assert code == EXIT_INVALID and "--schedule" in one_line_error(err)
    code, _, err = decice("submit", job, "-n", "elsewhere")
    assert code == EXIT_INVALID and "namespace" in one_line_error(err)
    code, _, err = decice("submit", write(tmp_path / "wf.yaml", workflow(wf_task(1, type="k8s_resource"))))
    assert code == EXIT_INVALID and "k8s_resource" in one_line_error(err)
    assert standin.log("POST") == []


# --- status, wait, delete, gc ------------------------------------------------------------------------


@pytest.fixture
def submitted(standin: APIServer) -> str:
    manifest = translate(workflow(wf_task(1, "prepare"), wf_task(2, "train", replicas=2, dependencies=[uid(1)])),
                         namespace="team-a")
    standin.store.create("team-a", manifest)
    return manifest["metadata"]["name"]


def set_status(standin: APIServer, name: str, phase: str, **extra) -> None:
    tasks = [{"name": "prepare", "phase": "Succeeded", "replicas": 1, "pending": 0, "running": 0, "succeeded": 1,
              "failed": 0, "nodes": ["edge-1"]},
             {"name": "train", "phase": "Running", "replicas": 2, "pending": 1, "running": 1, "succeeded": 0,
              "failed": 1, "nodes": ["gpu-a"], "message": "demo-train-0: exit code 1\nretrying"}]
    standin.store.update_status("team-a", name, {"phase": phase, "progress": "1/2", "message": "1/2 tasks succeeded",
                                                 "tasks": tasks, **extra})


def test_status_table(decice, standin, submitted):
    set_status(standin, submitted, "Running")
    code, out, _ = decice("status", submitted)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME:", submitted, "NAMESPACE:", "team-a", "PHASE:", "Running", "TASKS:", "1/2"]
    assert lines[1] == "MESSAGE: 1/2 tasks succeeded"
    assert lines[3].split() == ["TASK", "PHASE", "REPLICAS", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "NODES",
                                "MESSAGE"]
    assert lines[4].split() == ["prepare", "Succeeded", "1", "0", "0", "1", "0", "edge-1"]
    assert lines[5].split() == ["train", "Running", "2", "1", "1", "0", "1", "gpu-a", "demo-train-0:", "exit", "code",
                                "1", "retrying"]
    assert lines[3].index("PHASE") == lines[4].index("Succeeded") == lines[5].index("Running")


def test_status_of_a_job_the_hooks_have_not_seen(decice, submitted):
    code, out, _ = decice("status", submitted)
    assert code == 0 and "PHASE: -" in out and out.splitlines()[-1].split()[:3] == ["train", "-", "2"]


def test_status_as_objects_and_as_framework_updates(decice, standin, submitted):
    set_status(standin, submitted, "Running")
    code, out, _ = decice("status", submitted, "-o", "yaml")
    assert code == 0 and yaml.safe_load(out)["status"]["phase"] == "Running"
    code, out, _ = decice("status", submitted, "--updates")
    assert code == 0 and json.loads(out)["statuses"] == [
        {"task_id": uid(1), "status": "SUCCEEDED", "detail": None},
        {"task_id": uid(2), "status": "RUNNING", "detail": "demo-train-0: exit code 1\nretrying"}]


def test_a_missing_job_exits_5(decice, standin):
    for command in (["status", "nope"], ["wait", "nope", "--timeout", "5"], ["delete", "nope"]):
        code, out, err = decice(*command)
        assert code == EXIT_NOT_FOUND and out == "" and '"nope" not found' in one_line_error(err)
    assert decice("delete", "nope", "--ignore-not-found")[0] == 0


def test_wait_exit_codes(decice, standin, submitted):
    set_status(standin, submitted, "Running")
    code, out, err = decice("wait", submitted, "--timeout", "0.3")
    assert code == EXIT_TIMEOUT and out == "" and "timed out after 0.3s" in one_line_error(err)
    set_status(standin, submitted, "Failed", message="BackoffLimitExceeded: 4 failed pods exceed backoffLimit 3")
    code, out, err = decice("wait", submitted)
    assert code == EXIT_FAILED and out == f"decicejob.dev.decice.com/{submitted} Failed\n"
    assert "failed: BackoffLimitExceeded" in one_line_error(err)
    set_status(standin, submitted, "Succeeded")
    assert decice("wait", submitted, "--timeout", "5") == (0, f"decicejob.dev.decice.com/{submitted} Succeeded\n", "")


def test_wait_rejects_a_bad_timeout(decice, submitted):
    with pytest.raises(SystemExit) as info:
        decice("wait", submitted, "--timeout", "0")
    assert info.value.code == EXIT_INVALID


def test_delete(decice, standin, submitted):
    code, out, _ = decice("delete", submitted, "--cascade", "foreground")
    assert (code, out) == (0, f"decicejob.dev.decice.com/{submitted} deleted\n")
    assert standin.store.deletions == [("team-a", submitted, "Foreground")]


def test_gc(decice, standin, clock):
    for namespace, name, ttl in [("team-a", "old", 0), ("team-b", "other", 0), ("team-a", "keep", 3600)]:
        manifest = job_manifest(name)
        manifest["metadata"]["namespace"] = namespace
        manifest["spec"]["ttlSecondsAfterFinished"] = ttl
        standin.store.create(namespace, manifest)
        standin.store.update_status(namespace, name, {"phase": "Succeeded", "completionTime": clock.stamp(60)})
    assert decice("gc", "--dry-run") == (0, "decicejob.dev.decice.com/old deleted (dry run)\n", "")
    assert standin.store.deletions == []
    assert decice("gc", "-A") == (0, "decicejob.dev.decice.com/team-a/old\ndecicejob.dev.decice.com/team-b/other\n"
                                     .replace("\n", " deleted\n"), "")
    assert sorted(standin.store.objects) == [("team-a", "keep")]


# --- errors ----------------------------------------------------------------------------------------


def test_a_bad_kubeconfig_exits_2(tmp_path, capsys):
    (tmp_path / "kc").write_text("not: [a kubeconfig")
    assert main(["status", "x", "--kubeconfig", str(tmp_path / "kc")]) == EXIT_INVALID
    assert "cannot load the cluster configuration" in one_line_error(capsys.readouterr().err)


def test_a_failing_api_server_exits_1_after_retries(decice, standin):
    standin.inject(503, retry_after="0", times=20, message="the server is currently unable to handle the request")
    code, _, err = decice("status", "x")
    assert code == EXIT_ERROR and "unable to handle the request (503" in one_line_error(err)
    assert len(standin.log("GET")) == 6


def test_the_module_entry_point(kubeconfig: Path, standin, submitted):
    result = subprocess.run([sys.executable, "-m", "glue.cli", "status", submitted, "--kubeconfig", str(kubeconfig),
                             "--updates", "-o", "yaml"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["statuses"][0] == {"task_id": uid(1), "status": "PENDING", "detail": None}


def test_glue_exports_its_names_lazily():
    code = ("import sys, glue\n"
            "print('kubernetes' in sys.modules, 'marshmallow' in sys.modules)\n"
            "from glue import translate, task_statuses, InvalidWorkflow, NotFound\n"
            "print('kubernetes' in sys.modules)\n"
            "print(all(getattr(glue, name) is not None for name in glue.__all__), 'kubernetes' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.stdout.split() == ["False", "False", "False", "True", "True"], result.stderr
