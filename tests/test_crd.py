"""The DeciceJob CRD: structural, and refusing at admission what it can (schema + CEL)."""

from __future__ import annotations

import copy

import pytest
import yaml

from hooks import names
from hooks.model import DEFAULT_BACKOFF_LIMIT, QUANTITY_PATTERN, parse_job
from tests.conftest import CRD_PATH, job_manifest, task
from tests.driver import ROOT

CRD = yaml.safe_load(CRD_PATH.read_text())
VERSION = CRD["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]
SPEC = SCHEMA["properties"]["spec"]
TASK = SPEC["properties"]["tasks"]["items"]


def test_crd_identity():
    assert CRD["metadata"]["name"] == "decicejobs.dev.decice.com"
    assert CRD["spec"]["names"]["shortNames"] == ["dj"]
    assert "decice" in CRD["spec"]["names"]["categories"]
    assert CRD["spec"]["scope"] == "Namespaced"
    assert VERSION["subresources"] == {"status": {}}
    columns = {c["name"]: c for c in VERSION["additionalPrinterColumns"]}
    assert [c["jsonPath"] for c in columns.values() if not c.get("priority")] == [
        ".status.phase", ".status.progress", ".metadata.creationTimestamp"]
    assert {columns["Runtime"]["jsonPath"], columns["Message"]["jsonPath"]} == {".spec.runtime", ".status.message"}


def test_schema_is_structural_and_cel_bounded(crd_validator):
    assert crd_validator.structural_problems() == []


def test_limits_match_the_model():
    assert TASK["properties"]["name"]["maxLength"] == names.TASK_NAME_MAX
    assert TASK["properties"]["replicas"]["maximum"] == names.REPLICAS_MAX
    assert SPEC["properties"]["volumes"]["items"]["properties"]["name"]["maxLength"] == names.VOLUME_NAME_MAX
    assert SPEC["properties"]["backoffLimit"]["default"] == DEFAULT_BACKOFF_LIMIT
    assert TASK["properties"]["resources"]["properties"]["cpu"]["pattern"] == QUANTITY_PATTERN
    rules = " ".join(r["rule"] for r in SCHEMA["x-kubernetes-validations"])
    assert f"<= {names.JOB_NAME_MAX}" in rules and f"<= {names.JOB_AND_TASK_NAME_MAX}" in rules


def test_crd_defaults_match_the_model(crd_validator):
    manifest = job_manifest(tasks=[task("a", ports=[{"containerPort": 80}],
                                        volumeMounts=[{"volume": "v", "mountPath": "/v"}])],
                            volumes=[{"name": "v", "size": "1Gi"}])
    defaulted = crd_validator.defaulted(manifest)
    spec = defaulted["spec"]
    assert spec["runtime"] == "kubernetes" and spec["suspend"] is False
    assert spec["backoffLimit"] == DEFAULT_BACKOFF_LIMIT
    assert spec["tasks"][0]["replicas"] == 1 and spec["tasks"][0]["restartPolicy"] == "Never"
    assert spec["tasks"][0]["ports"][0]["protocol"] == "TCP"
    assert spec["volumes"][0]["accessModes"] == ["ReadWriteOnce"]
    assert parse_job(defaulted) == parse_job(manifest), "API-server defaults and the model's agree"


VALID = [
    job_manifest(),
    job_manifest(tasks=[task("a", replicas=4, resources={"cpu": 2, "memory": "4Gi", "gpu": 1,
                                                         "extended": {"example.com/fpga": 1}}),
                        task("b", dependsOn=["a"], restartPolicy="OnFailure")],
                 minAvailable=5, queue="hpc", runtime="kubernetes"),
    job_manifest(tasks=[task("web", restartPolicy="Always", ports=[{"containerPort": 80, "name": "http"}],
                             placement={"nodes": ["n1", "n2"], "nodeSelector": {"a": "b"},
                                        "tolerations": [{"key": "k", "operator": "Exists"}],
                                        "nodeGroups": [{"name": "g1", "replicas": 2}]},
                             env=[{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}])],
                 volumes=[{"name": "shared", "existingClaim": "team-pvc"}],
                 activeDeadlineSeconds=600, pendingDeadlineSeconds=60, ttlSecondsAfterFinished=0, suspend=True),
    job_manifest(name="a" * 40, tasks=[task("t" * 10)]),
]


@pytest.mark.parametrize("manifest", VALID)
def test_valid_jobs_are_admitted_and_parse(crd_validator, manifest):
    assert crd_validator.errors(manifest) == []
    parse_job(manifest)


def _with(**spec_changes):
    manifest = job_manifest()
    manifest["spec"].update(spec_changes)
    return manifest


INVALID = {
    "duplicate task": (_with(tasks=[task("a"), task("a")]), "name"),
    "unknown dependency": (_with(tasks=[task("a", dependsOn=["nope"])]), "dependsOn must name tasks"),
    "self dependency": (_with(tasks=[task("a", dependsOn=["a"])]), "cannot depend on itself"),
    "unknown volume": (_with(tasks=[task("a", volumeMounts=[{"volume": "v", "mountPath": "/v"}])]),
                       "volumeMounts must name volumes"),
    "minAvailable too big": (_with(minAvailable=3, tasks=[task("a", replicas=2)]), "minAvailable"),
    "sedna fields without sedna": (_with(tasks=[task("a", role="edge")]), "only allowed with runtime sedna"),
    "sedna settings without sedna": (_with(sedna={"kind": "FederatedLearningJob"}), "only allowed with runtime sedna"),
    "bad runtime": (_with(runtime="slurm"), "runtime"),
    "bad restart policy": (_with(tasks=[task("a", restartPolicy="Sometimes")]), "restartPolicy"),
    "zero replicas": (_with(tasks=[task("a", replicas=0)]), "replicas"),
    "bad quantity": (_with(tasks=[task("a", resources={"memory": "lots"})]), "memory"),
    "volume without size or claim": (_with(volumes=[{"name": "v"}]), "exactly one of size"),
    "volume with size and claim": (_with(volumes=[{"name": "v", "size": "1Gi", "existingClaim": "c"}]),
                                   "exactly one of size"),
    "uppercase task": (_with(tasks=[task("Train")]), "name"),
    "task name too long": (_with(tasks=[task("t" * 41)]), "name"),
    "no tasks": (_with(tasks=[]), "tasks"),
    "unknown field": (_with(tasks=[task("a", imagePullPolicy="Always")]), "imagePullPolicy"),
    "label value too long": (_with(tasks=[task("a", labels={"team": "x" * 64})]), "labels"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_jobs_are_refused_at_admission(crd_validator, case):
    manifest, fragment = INVALID[case]
    errors = crd_validator.errors(manifest)
    assert errors and any(fragment in e for e in errors), errors


def test_names_too_long_for_derived_children_are_refused(crd_validator):
    assert any("40 characters" in e for e in crd_validator.errors(job_manifest(name="a" * 41)))
    manifest = job_manifest(name="a" * 30, tasks=[task("b" * 21)])
    assert any("50 characters" in e for e in crd_validator.errors(manifest))
    assert any("starting with a letter" in e for e in crd_validator.errors(job_manifest(name="1job")))


def test_model_refuses_what_the_crd_refuses(crd_validator):
    """The hook's model (used by decice render too) agrees with admission on every invalid case."""
    from hooks.model import InvalidSpec

    for case, (manifest, _) in INVALID.items():
        with pytest.raises(InvalidSpec):
            parse_job(copy.deepcopy(manifest))
        assert crd_validator.errors(manifest), case


def test_examples_are_valid(crd_validator):
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "DeciceJob":
                assert crd_validator.errors(doc) == [], path.name
                parse_job(doc)


def test_status_written_by_the_hook_fits_the_schema(controller, cluster, kubelet, submit):
    """The driver validates the parent after every sync; pruned fields would make status drift."""
    job = submit(job_manifest(tasks=[task("a", replicas=2)], volumes=[{"name": "v", "size": "1Gi"}]))
    controller.sync(job)
    kubelet.run_all(cluster.pods(job))
    controller.sync(job)
    kubelet.finish_all(cluster.pods(job))
    controller.sync(job)
    status_schema = SCHEMA["properties"]["status"]["properties"]
    assert set(job["status"]) <= set(status_schema)
    assert set(job["status"]["tasks"][0]) <= set(status_schema["tasks"]["items"]["properties"])
