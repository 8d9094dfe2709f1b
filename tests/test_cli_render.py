"""``decice render``: offline, the same code path as /sync, through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import yaml

from hooks.sync import handle, render
from tests.conftest import job_manifest, task
from tests.driver import ROOT

EXAMPLE = ROOT / "examples" / "train-eval.yaml"


def decice(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "glue.cli", *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_render_yaml_and_json_agree():
    as_yaml = decice("render", str(EXAMPLE))
    as_json = decice("render", str(EXAMPLE), "-o", "json")
    assert as_yaml.returncode == 0 and as_json.returncode == 0, as_yaml.stderr + as_json.stderr
    docs = [d for d in yaml.safe_load_all(as_yaml.stdout) if d]
    assert docs == json.loads(as_json.stdout)
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Service", "train-eval"), ("PersistentVolumeClaim", "train-eval-work"), ("Pod", "train-eval-prepare-0")]


def test_render_is_the_first_sync():
    manifest = job_manifest(tasks=[task("a", replicas=2), task("b", dependsOn=["a"])])
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    parent = dict(manifest, metadata={**manifest["metadata"], "uid": "", "generation": 0})
    empty = {"Pod.v1": {}, "Service.v1": {}, "PersistentVolumeClaim.v1": {}}
    assert render(manifest, now) == handle({"parent": parent, "children": empty}, now)["children"]


def test_render_from_stdin():
    result = decice("render", "-", "-o", "json", stdin=yaml.safe_dump(job_manifest()))
    assert result.returncode == 0
    assert [c["metadata"]["name"] for c in json.loads(result.stdout)] == ["demo", "demo-main-0"]


def test_invalid_job_exits_2_with_one_line_on_stderr(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(job_manifest(tasks=[task("a", dependsOn=["zzz"])])))
    result = decice("render", str(bad))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "zzz" in result.stderr


def test_unreadable_inputs_exit_2(tmp_path):
    assert decice("render", str(tmp_path / "missing.yaml")).returncode == 2
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("a: [b\n")
    result = decice("render", str(garbage))
    assert result.returncode == 2 and "not valid YAML" in result.stderr
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump_all([job_manifest(), job_manifest()]))
    assert decice("render", str(two)).returncode == 2


def test_unknown_sedna_kind_is_refused(tmp_path):
    path = tmp_path / "sedna.yaml"
    path.write_text(yaml.safe_dump(job_manifest(runtime="sedna", sedna={"kind": "Nope"})))
    result = decice("render", str(path))
    assert result.returncode == 2 and "spec.sedna.kind" in result.stderr


def test_render_path_does_not_import_the_kubernetes_client():
    code = ("import sys, io, contextlib; from glue.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): main(['render', {str(EXAMPLE)!r}])\n"
            "print('kubernetes' in sys.modules, 'flask' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_console_script_entry_point_exists():
    from importlib.metadata import entry_points

    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts["decice"] == "glue.cli:main"
    assert scripts["decice-hooks"] == "hooks.server:main"
