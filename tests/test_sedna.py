"""The sedna runtime: a DeciceJob as one Sedna resource, its admission rules, and its status."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone

import pytest
import yaml

from hooks import names
from hooks.model import SEDNA_ROLE_RULES, SEDNA_ROLES, SEDNA_SETTINGS, InvalidSpec, parse_job
from hooks.policy import Policy
from hooks.runtimes import sedna as runtime
from hooks.sync import handle, render
from tests.conftest import job_manifest
from tests.driver import KIND_OF_RESOURCE, ROOT, Controller, FlaskTransport, load_controller
from tests.helpers import condition, names as object_names, phase, task_status
from tests.schemas import REFERENCE_CRDS, CRDValidator, builtin_errors, reference_crd_path
from tests.sedna_sim import SednaControllers

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PLURALS = {
    "JointInferenceService": "jointinferenceservices",
    "FederatedLearningJob": "federatedlearningjobs",
    "IncrementalLearningJob": "incrementallearningjobs",
    "LifelongLearningJob": "lifelonglearningjobs",
}
EXAMPLES = {
    "JointInferenceService": ROOT / "examples" / "sedna-joint-inference.yaml",
    "FederatedLearningJob": ROOT / "examples" / "sedna-federated-learning.yaml",
    "IncrementalLearningJob": ROOT / "examples" / "sedna-incremental-learning.yaml",
    "LifelongLearningJob": ROOT / "examples" / "sedna-lifelong-learning.yaml",
}


def sedna_crd(kind: str) -> CRDValidator:
    """Sedna's published CRD of ``kind`` (loaded once per session; skips when absent)."""
    return CRDValidator.from_file(reference_crd_path("sedna", f"sedna.io_{PLURALS[kind]}.yaml"))


def example(kind: str) -> dict:
    manifest = yaml.safe_load(EXAMPLES[kind].read_text())
    manifest["metadata"]["namespace"] = "team-a"
    return manifest


def worker(name: str, role: str, **fields) -> dict:
    return {"name": name, "role": role, "image": f"registry.example/{name}:1", **fields}


TRIGGER = {"metric": "num_of_samples", "operator": ">", "threshold": 100}

MINIMAL = {
    "JointInferenceService": dict(
        sedna={"kind": "JointInferenceService", "hardExampleMining": {"name": "IBT"}},
        tasks=[worker("little", "edge", model="small", placement={"nodes": ["e1"]}),
               worker("big", "cloud", model="big")]),
    "FederatedLearningJob": dict(
        sedna={"kind": "FederatedLearningJob"},
        tasks=[worker("agg", "aggregation", model="global"),
               worker("train", "training", dataset="data", replicas=2, placement={"nodes": ["e1", "e2"]})]),
    "IncrementalLearningJob": dict(
        sedna={"kind": "IncrementalLearningJob", "outputDir": "/output", "trainTrigger": TRIGGER,
               "deployTrigger": {"metric": "precision_delta", "operator": ">=", "threshold": 0.1},
               "hardExampleMining": {"name": "IBT"}},
        tasks=[worker("train", "train", model="initial", dataset="data"), worker("eval", "eval"),
               worker("infer", "deploy", model="deployed")]),
    "LifelongLearningJob": dict(
        sedna={"kind": "LifelongLearningJob", "outputDir": "/output", "trainTrigger": TRIGGER},
        tasks=[worker("train", "train", dataset="data"), worker("eval", "eval"), worker("infer", "deploy")]),
}


def minimal(kind: str, name: str = "demo") -> dict:
    return job_manifest(name, runtime="sedna", **copy.deepcopy(MINIMAL[kind]))


def rendered(manifest: dict, policy: Policy = Policy()) -> dict:
    (resource,) = render(manifest, NOW, policy)
    return resource


def env(template: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "<from>") for e in template["spec"]["containers"][0]["env"]}


# --- rendering -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_examples_become_one_valid_sedna_resource(kind, crd_validator):
    manifest = example(kind)
    assert crd_validator.errors(manifest) == []
    resource = rendered(manifest)
    assert (resource["apiVersion"], resource["kind"]) == ("sedna.io/v1alpha1", kind)
    assert resource["metadata"] == {
        "name": names.sedna_name(manifest["metadata"]["name"]),
        "namespace": "team-a",
        "labels": names.job_labels(manifest["metadata"]["name"]),
    }
    assert sedna_crd(kind).errors(resource) == []


@pytest.mark.parametrize("kind", sorted(MINIMAL))
def test_minimal_jobs_are_admitted_and_valid_sedna_resources(kind, crd_validator):
    manifest = minimal(kind)
    assert crd_validator.errors(manifest) == []
    assert sedna_crd(kind).errors(rendered(manifest)) == []


def test_decice_render_prints_the_same_resource():
    from tests.test_cli_render import decice

    result = decice("render", str(EXAMPLES["FederatedLearningJob"]), "-o", "json")
    assert result.returncode == 0, result.stderr
    (printed,) = json.loads(result.stdout)
    manifest = yaml.safe_load(EXAMPLES["FederatedLearningJob"].read_text())
    assert printed == render(manifest, NOW)[0], "the CLI and the hook share one code path"


def test_joint_inference_workers():
    resource = rendered(example("JointInferenceService"))
    edge, cloud = resource["spec"]["edgeWorker"], resource["spec"]["cloudWorker"]
    assert edge["model"] == {"name": "helmet-detection-little-model"}
    assert cloud["model"] == {"name": "helmet-detection-big-model"}
    assert edge["hardExampleMining"] == {"name": "IBT", "parameters": [
        {"key": "threshold_box", "value": "0.9"}, {"key": "threshold_img", "value": "0.9"}]}, "sorted by key"
    assert set(edge["template"]) == set(cloud["template"]) == {"spec"}, "Sedna's CRDs drop template metadata"
    edge_pod, cloud_pod = edge["template"]["spec"], cloud["template"]["spec"]
    assert edge_pod["nodeName"] == "edge-node-1" and "affinity" not in edge_pod, "Sedna reads the edge node"
    assert "nodeName" not in cloud_pod
    assert cloud_pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["cloud-gpu-1"]}]}]}
    assert edge_pod["restartPolicy"] == cloud_pod["restartPolicy"] == "Always", "Sedna runs Deployments"
    assert cloud_pod["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}
    assert env(edge["template"]) == {
        "DECICE_TASK_INDEX": "0", "DECICE_JOB_NAME": "helmet-detection", "DECICE_NAMESPACE": "<from>",
        "DECICE_TASK_NAME": "little-model", "DECICE_TASK_REPLICAS": "1",
        "input_shape": "416,736", "video_url": "rtsp://camera.local/video"}


def test_federated_learning_has_one_training_worker_per_replica_on_its_node():
    manifest = example("FederatedLearningJob")
    manifest["spec"]["tasks"][1]["replicas"] = 3
    manifest["spec"]["tasks"].append(worker("train-b", "training", dataset="other-data", placement={"nodes": ["e9"]}))
    resource = rendered(manifest)
    spec = resource["spec"]
    assert spec["aggregationWorker"]["model"] == {"name": "surface-defect-model"}
    workers = spec["trainingWorkers"]
    assert [(w["dataset"]["name"], w["template"]["spec"]["nodeName"], env(w["template"])["DECICE_TASK_INDEX"])
            for w in workers] == [
        ("surface-defect-data", "edge-node-1", "0"), ("surface-defect-data", "edge-node-2", "1"),
        ("surface-defect-data", "edge-node-1", "2"), ("other-data", "e9", "0")], "replica i on nodes[i % len]"
    assert all(w["template"]["spec"]["restartPolicy"] == "OnFailure" for w in workers[:3])
    assert spec["transmitter"] == {"ws": {}} and "pretrainedModel" not in spec
    assert sedna_crd("FederatedLearningJob").errors(resource) == []


def test_federated_learning_settings():
    manifest = minimal("FederatedLearningJob")
    manifest["spec"]["sedna"].update(
        pretrainedModel="yolo-pretrained",
        transmitter={"type": "s3", "aggregationDataPath": "s3://fl/agg", "credentialName": "minio"})
    spec = rendered(manifest)["spec"]
    assert spec["pretrainedModel"] == {"name": "yolo-pretrained"}
    assert spec["transmitter"] == {"s3": {"aggDataPath": "s3://fl/agg", "credentialName": "minio"}}
    assert sedna_crd("FederatedLearningJob").errors(rendered(manifest)) == []


def test_incremental_learning_stages():
    resource = rendered(example("IncrementalLearningJob"))
    spec = resource["spec"]
    assert spec["dataset"] == {"name": "helmet-samples", "trainProb": 0.8}
    assert spec["initialModel"] == {"name": "helmet-initial-model"}
    assert spec["trainSpec"]["trigger"] == {
        "checkPeriodSeconds": 60, "timer": {"start": "02:00", "end": "04:00"},
        "condition": {"operator": ">", "threshold": 500, "metric": "num_of_samples"}}
    assert spec["deploySpec"]["trigger"] == {"condition": {"operator": ">", "threshold": 0.1, "metric": "precision_delta"}}
    assert spec["deploySpec"]["model"] == {"name": "helmet-deploy-model"}
    assert spec["deploySpec"]["hardExampleMining"]["name"] == "IBT"
    assert "initialEvalModel" not in spec["evalSpec"]
    assert (spec["outputDir"], spec["credentialName"]) == ("s3://models/helmet-incremental", "model-store")
    assert spec["trainSpec"]["template"]["spec"]["containers"][0]["args"] == ["train.py"]
    assert {s: spec[s]["template"]["spec"]["nodeName"] for s in ("trainSpec", "evalSpec", "deploySpec")} == {
        "trainSpec": "edge-node-1", "evalSpec": "edge-node-1", "deploySpec": "edge-node-1"}


def test_incremental_learning_options_and_defaults():
    manifest = minimal("IncrementalLearningJob")
    manifest["spec"]["sedna"]["modelHotUpdate"] = {}
    manifest["spec"]["tasks"][1]["model"] = "baseline"
    resource = rendered(manifest)
    spec = resource["spec"]
    assert spec["dataset"]["trainProb"] == 0.8, "the default train/test split"
    assert spec["deploySpec"]["model"] == {"name": "deployed", "hotUpdateEnabled": True, "pollPeriodSeconds": 60}
    assert spec["evalSpec"]["initialEvalModel"] == {"name": "baseline"}
    assert "credentialName" not in spec
    assert "nodeName" not in spec["trainSpec"]["template"]["spec"], "no placement: the scheduler decides"
    assert sedna_crd("IncrementalLearningJob").errors(resource) == []


def test_lifelong_learning_stages():
    resource = rendered(example("LifelongLearningJob"))
    spec = resource["spec"]
    assert spec["dataset"] == {"name": "atcii-data", "trainProb": 0.8}
    assert set(spec) == {"dataset", "trainSpec", "evalSpec", "deploySpec", "outputDir", "credentialName"}
    assert set(spec["deploySpec"]) == set(spec["evalSpec"]) == {"template"}
    assert spec["trainSpec"]["trigger"]["condition"]["metric"] == "num_of_samples"


def test_edge_workers_get_the_operators_edge_tolerations():
    edge_taint = {"key": "node-role.kubernetes.io/edge", "operator": "Exists", "effect": "NoSchedule"}
    manifest = example("JointInferenceService")
    manifest["spec"]["tasks"][0]["placement"]["tolerations"] = [edge_taint]
    spec = rendered(manifest, Policy(edge_tolerations=(edge_taint, {"key": "edge", "operator": "Exists"})))["spec"]
    assert spec["edgeWorker"]["template"]["spec"]["tolerations"] == [edge_taint, {"key": "edge", "operator": "Exists"}]
    assert "tolerations" not in spec["cloudWorker"]["template"]["spec"]


def test_job_volumes_are_mounted_by_sedna_workers(crd_validator):
    manifest = minimal("FederatedLearningJob")
    manifest["spec"]["volumes"] = [{"name": "scratch", "size": "5Gi"}]
    manifest["spec"]["tasks"][1]["volumeMounts"] = [{"volume": "scratch", "mountPath": "/scratch"}]
    assert crd_validator.errors(manifest) == []
    claim, resource = render(manifest, NOW)
    assert (claim["kind"], claim["metadata"]["name"]) == ("PersistentVolumeClaim", "demo-scratch")
    assert builtin_errors(claim) == []
    pod = resource["spec"]["trainingWorkers"][0]["template"]["spec"]
    assert pod["volumes"] == [{"name": "scratch", "persistentVolumeClaim": {"claimName": "demo-scratch"}}]
    assert sedna_crd("FederatedLearningJob").errors(resource) == []


def test_rendering_is_deterministic():
    for kind in sorted(EXAMPLES):
        first = json.dumps(render(example(kind), NOW))
        assert json.dumps(render(example(kind), NOW)) == first


def test_names_sedna_derives_stay_valid():
    assert names.JOB_NAME_MAX + names.SEDNA_SUFFIX_MAX <= names.DNS_LABEL_MAX
    longest = "a" * names.JOB_NAME_MAX
    assert len(f"{names.sedna_name(longest)}-aggregation") <= names.DNS_LABEL_MAX
    assert len(f"{names.sedna_name(longest)}-Cloud-svc") <= names.DNS_LABEL_MAX


# --- admission: the CRD's CEL rules and the model agree ---------------------------------------


def _edit(kind: str, change) -> dict:
    manifest = minimal(kind)
    change(manifest["spec"])
    return manifest


def _task(index: int, **fields):
    def change(spec: dict) -> None:
        for key, value in fields.items():
            if value is None:
                spec["tasks"][index].pop(key, None)
            else:
                spec["tasks"][index][key] = value
    return change


def _sedna(**fields):
    def change(spec: dict) -> None:
        for key, value in fields.items():
            if value is None:
                spec["sedna"].pop(key, None)
            else:
                spec["sedna"][key] = value
    return change


JIS, FL, IL, LL = "JointInferenceService", "FederatedLearningJob", "IncrementalLearningJob", "LifelongLearningJob"

INVALID = {
    "sedna runtime without spec.sedna": (_edit(FL, lambda s: s.pop("sedna")), "needs spec.sedna"),
    "task without role": (_edit(FL, _task(0, role=None)), "needs a role"),
    "unknown kind": (_edit(FL, _sedna(kind="ObjectSearchService")), "kind"),
    "unknown role": (_edit(FL, _task(0, role="observer")), "role"),
    "two edge workers": (_edit(JIS, lambda s: s["tasks"].append(worker("e2", "edge", model="m", placement={"nodes": ["n"]}))),
                         "exactly one task with role edge"),
    "no cloud worker": (_edit(JIS, lambda s: s["tasks"].pop(1)), "exactly one task with role edge and one with role cloud"),
    "training role in joint inference": (_edit(JIS, lambda s: s["tasks"].append(worker("t", "training", dataset="d", placement={"nodes": ["n"]}))),
                                         "no other roles"),
    "no aggregation worker": (_edit(FL, lambda s: s["tasks"].pop(0)), "exactly one task with role aggregation"),
    "two aggregation workers": (_edit(FL, lambda s: s["tasks"].append(worker("agg2", "aggregation", model="m"))),
                                "exactly one task with role aggregation"),
    "no training worker": (_edit(FL, lambda s: s["tasks"].pop(1)), "at least one with role training"),
    "incremental job without eval": (_edit(IL, lambda s: s["tasks"].pop(1)), "exactly one task each with role train, eval"),
    "edge role in lifelong learning": (_edit(LL, _task(2, role="edge", model="m", placement={"nodes": ["n"]})),
                                       "exactly one task each with role train, eval"),
    "edge worker without model": (_edit(JIS, _task(0, model=None)), "need a model"),
    "aggregation without model": (_edit(FL, _task(0, model=None)), "need a model"),
    "training without dataset": (_edit(FL, _task(1, dataset=None)), "need a dataset"),
    "dataset on a cloud worker": (_edit(JIS, _task(1, dataset="d")), "only tasks with role training or train take a dataset"),
    "dataset on eval": (_edit(IL, _task(1, dataset="d")), "only tasks with role training or train take a dataset"),
    "model on training": (_edit(FL, _task(1, model="m")), "take no model"),
    "replicas on aggregation": (_edit(FL, _task(0, replicas=2)), "only tasks with role training may have several replicas"),
    "replicas on deploy": (_edit(IL, _task(2, replicas=3)), "only tasks with role training may have several replicas"),
    "edge worker without node": (_edit(JIS, _task(0, placement=None)), "need placement.nodes"),
    "training worker without node": (_edit(FL, _task(1, placement={"nodeSelector": {"a": "b"}})), "need placement.nodes"),
    "training that never ends": (_edit(FL, _task(1, restartPolicy="Always")), "restartPolicy Always is not allowed"),
    "eval that never ends": (_edit(LL, _task(1, restartPolicy="Always")), "restartPolicy Always is not allowed"),
    "dependsOn in a sedna job": (_edit(IL, _task(1, dependsOn=["train"])), "cannot use dependsOn"),
    "labels on a sedna task": (_edit(JIS, _task(1, labels={"team": "a"})), "labels or annotations"),
    "annotations on a sedna task": (_edit(FL, _task(0, annotations={"a": "b"})), "labels or annotations"),
    "incremental train without initial model": (_edit(IL, _task(0, model=None)), "a model on its train task"),
    "incremental deploy without model": (_edit(IL, _task(2, model=None)), "a model on its train task"),
    "lifelong task with a model": (_edit(LL, _task(2, model="m")), "take no model"),
    "joint inference without hard example mining": (_edit(JIS, _sedna(hardExampleMining=None)), "hardExampleMining"),
    "hard example mining in federated learning": (_edit(FL, _sedna(hardExampleMining={"name": "IBT"})), "hardExampleMining"),
    "incremental job without deploy trigger": (_edit(IL, _sedna(deployTrigger=None)), "deployTrigger"),
    "deploy trigger in lifelong learning": (_edit(LL, _sedna(deployTrigger=TRIGGER)), "deployTrigger"),
    "lifelong job without output dir": (_edit(LL, _sedna(outputDir=None)), "outputDir"),
    "incremental job without train trigger": (_edit(IL, _sedna(trainTrigger=None)), "trainTrigger"),
    "train trigger in federated learning": (_edit(FL, _sedna(trainTrigger=TRIGGER)), "trainTrigger"),
    "train prob in joint inference": (_edit(JIS, _sedna(trainProb=0.5)), "trainProb"),
    "pretrained model in incremental learning": (_edit(IL, _sedna(pretrainedModel="m")), "pretrainedModel"),
    "hot update in lifelong learning": (_edit(LL, _sedna(modelHotUpdate={})), "modelHotUpdate"),
    "s3 transmitter without path": (_edit(FL, _sedna(transmitter={"type": "s3"})), "aggregationDataPath"),
    "ws transmitter with path": (_edit(FL, _sedna(transmitter={"aggregationDataPath": "s3://x"})), "aggregationDataPath"),
    "ws transmitter with credential": (_edit(FL, _sedna(transmitter={"credentialName": "s"})), "credentialName"),
    "unknown trigger operator": (_edit(LL, _sedna(trainTrigger={**TRIGGER, "operator": "=~"})), "operator"),
    "trigger time out of range": (_edit(LL, _sedna(trainTrigger={**TRIGGER, "timer": {"start": "25:00", "end": "03:00"}})),
                                  "start"),
    "trigger time as a YAML sexagesimal": (_edit(LL, _sedna(trainTrigger={**TRIGGER, "timer": {"start": 120, "end": 240}})),
                                           "start"),
    "threshold as a string": (_edit(LL, _sedna(trainTrigger={**TRIGGER, "threshold": "500"})), "threshold"),
    "train prob of zero": (_edit(IL, _sedna(trainProb=0)), "trainProb"),
    "train prob above one": (_edit(IL, _sedna(trainProb=1.5)), "trainProb"),
    "model name not a DNS subdomain": (_edit(JIS, _task(1, model="Big_Model")), "model"),
    "unknown sedna setting": (_edit(FL, _sedna(rounds=3)), "rounds"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_sedna_jobs_are_refused_by_the_crd_and_the_model(crd_validator, case):
    manifest, fragment = INVALID[case]
    errors = crd_validator.errors(manifest)
    assert any(fragment in e for e in errors), errors
    with pytest.raises(InvalidSpec):
        parse_job(copy.deepcopy(manifest))


def _variants(kind: str):
    """Each task of a minimal job of ``kind`` given every role, with and without model and dataset,
    several replicas, restartPolicy Always, no nodes; and each setting of spec.sedna added or removed."""
    base = minimal(kind)
    values = {"model": "m", "dataset": "d"}
    for index in range(len(base["spec"]["tasks"])):
        for role in SEDNA_ROLES:
            for present in ((), ("model",), ("dataset",), ("model", "dataset")):
                fields = {key: values[key] if key in present else None for key in values}
                yield _edit(kind, _task(index, role=role, **fields))
        for change in ({"replicas": 2}, {"restartPolicy": "Always"}, {"placement": None}):
            yield _edit(kind, _task(index, **change))
    settings = {
        "hardExampleMining": {"name": "IBT", "parameters": {"t": "1"}}, "pretrainedModel": "m",
        "transmitter": {"type": "s3", "aggregationDataPath": "s3://a"}, "trainProb": 0.5, "outputDir": "/o",
        "credentialName": "c", "trainTrigger": TRIGGER, "deployTrigger": TRIGGER, "modelHotUpdate": {},
    }
    assert set(settings) == set(SEDNA_SETTINGS)
    for key, value in settings.items():
        yield _edit(kind, _sedna(**{key: value}))
        yield _edit(kind, _sedna(**{key: None}))


@pytest.mark.parametrize("kind", sorted(SEDNA_ROLE_RULES))
def test_crd_and_model_agree_on_every_role_and_setting(crd_validator, kind):
    """What admission accepts, the hook runs; what it refuses, the hook reports as InvalidSpec."""
    outcomes = []
    for manifest in _variants(kind):
        admitted = crd_validator.errors(manifest) == []
        try:
            parse_job(copy.deepcopy(manifest))
            parsed = True
        except InvalidSpec:
            parsed = False
        assert admitted == parsed, (json.dumps(manifest["spec"]), crd_validator.errors(manifest))
        outcomes.append(admitted)
    assert outcomes.count(True) >= 5 and outcomes.count(False) >= 20, "the variants exercise both outcomes"


# --- status through the Metacontroller protocol ------------------------------------------------


@pytest.fixture
def controller(cluster, app, crd_validator) -> Controller:
    """Metacontroller with the sedna component; the parent, its claims and its Sedna resources
    are validated after every sync (Sedna's CRDs when they are available)."""

    def validate(job: dict) -> list[str]:
        errors = crd_validator.errors(job)
        for child in cluster.children_of(job):
            if child["apiVersion"] == "v1":
                errors += builtin_errors(child)
            elif REFERENCE_CRDS.is_dir():
                errors += [f"{child['kind']}: {e}" for e in sedna_crd(child["kind"]).errors(child)]
        return errors

    return Controller(cluster, FlaskTransport(app), controller=load_controller("sedna"), validate=validate)


@pytest.fixture
def sedna(cluster) -> SednaControllers:
    return SednaControllers(cluster)


def test_the_component_adds_every_sedna_kind_the_runtime_writes():
    rules = load_controller("sedna")["spec"]["childResources"]
    sedna_rules = [r for r in rules if r["apiVersion"] == runtime.API_VERSION]
    keys = {f"{KIND_OF_RESOURCE[(r['apiVersion'], r['resource'])]}.{r['apiVersion']}" for r in sedna_rules}
    assert keys == set(runtime.CHILD_KINDS)
    assert {r["updateStrategy"]["method"] for r in sedna_rules} == {"OnDelete"}


def test_federated_learning_runs_to_success(controller, cluster, sedna, submit):
    job = submit(example("FederatedLearningJob"))
    controller.sync(job)
    resource = sedna.resource(job)
    assert (resource["kind"], resource["metadata"]["name"]) == ("FederatedLearningJob", "surface-defect")
    assert phase(job) == "Pending" and job["status"]["startTime"]

    controller.sync(job)
    assert phase(job) == "Pending", "Sedna has not taken the job yet"
    assert task_status(job, "train")["pending"] == 2

    sedna.start_training(resource)
    controller.sync(job)
    assert phase(job) == "Running"
    train = task_status(job, "train")
    assert (train["phase"], train["running"], train["nodes"]) == ("Running", 2, ["edge-node-1", "edge-node-2"])
    assert task_status(job, "aggregate")["nodes"] == [], "cloud workers are not bound by nodeName"

    sedna.round(resource, 2)
    controller.sync(job)
    assert "Round 2 reaches at" in task_status(job, "train")["message"]

    sedna.complete(resource)
    controller.sync(job)
    assert phase(job) == "Succeeded"
    assert condition(job, "Complete")["status"] == "True" and job["status"]["progress"] == "2/2"
    assert [task_status(job, t)["succeeded"] for t in ("aggregate", "train")] == [1, 2]
    assert object_names(cluster.children_of(job)) == ["surface-defect"], "kept while Sedna keeps the workers' logs"

    cluster.clock.advance(86400)
    controller.sync(job)
    assert cluster.children_of(job) == [], "removed after ttlSecondsAfterFinished"
    assert phase(job) == "Succeeded" and task_status(job, "train")["succeeded"] == 2
    controller.sync(job)
    assert cluster.children_of(job) == [], "a finished job starts nothing again"
    assert task_status(job, "train")["succeeded"] == 2, "counts latched once the resource is gone"


def test_a_failed_sedna_job_fails_the_decicejob(controller, cluster, sedna, submit):
    job = submit(example("FederatedLearningJob"))
    controller.sync(job)
    resource = sedna.start_training(sedna.resource(job))
    controller.sync(job)
    sedna.fail_training(resource)
    controller.sync(job)
    assert phase(job) == "Failed"
    failed = condition(job, "Failed")
    assert failed["reason"] == runtime.FAILED_REASON
    assert failed["message"] == ("FederatedLearningJob surface-defect failed: Failed: workerFailed: "
                                 "the worker of FederatedLearningJob failed (1 failed worker)")
    assert {task_status(job, t)["phase"] for t in ("aggregate", "train")} == {"Failed"}
    assert object_names(cluster.children_of(job)) == ["surface-defect"], "kept for its workers' logs"
    controller.sync(job)
    assert phase(job) == "Failed" and len(cluster.children_of(job)) == 1, "never recreated"


def test_joint_inference_is_a_service(controller, cluster, sedna, submit):
    job = submit(example("JointInferenceService"))
    controller.sync(job)
    resource = sedna.resource(job)
    assert phase(job) == "Pending"
    sedna.serve(resource)
    for _ in range(3):
        controller.sync(job)
        assert phase(job) == "Running", "a JointInferenceService never succeeds"
    edge = task_status(job, "little-model")
    assert (edge["running"], edge["ready"], edge["nodes"], edge["message"]) == (1, 1, ["edge-node-1"], "Running")
    assert condition(job, "Progressing")["status"] == "True"
    assert job["status"]["progress"] == "0/2"

    sedna.lose_worker(resource)
    controller.sync(job)
    assert phase(job) == "Failed"
    assert condition(job, "Failed")["message"].startswith("JointInferenceService helmet-detection failed: Failed: workerFailed")


def test_deleting_a_sedna_job_waits_for_the_sedna_resource(controller, cluster, sedna, submit):
    job = submit(example("JointInferenceService"))
    controller.sync(job)
    sedna.serve(sedna.resource(job))
    controller.sync(job)
    controller.delete_job(job)
    response = controller.sync(job)
    assert response["finalized"] is False and response["children"] == []
    assert cluster.children_of(job) == []
    assert controller.sync(job)["finalized"] is True


def test_incremental_learning_loop(controller, cluster, sedna, submit):
    manifest = example("IncrementalLearningJob")
    manifest["spec"]["backoffLimit"] = 0
    job = submit(manifest)
    controller.sync(job)
    resource = sedna.resource(job)
    assert [task_status(job, t)["phase"] for t in ("train", "eval", "infer")] == ["Pending"] * 3

    sedna.take(resource)
    controller.sync(job)
    assert phase(job) == "Running"
    assert [task_status(job, t)["phase"] for t in ("train", "eval", "infer")] == ["Pending", "Pending", "Running"], \
        "Sedna starts the inference worker as soon as it takes the job"
    assert task_status(job, "train")["message"] == "stage Train: Waiting: reported by lc"
    assert task_status(job, "train")["pending"] == 1

    sedna.stage(resource, "Train", "Ready")
    sedna.stage(resource, "Train", "Starting")
    sedna.stage(resource, "Train", "Running", node="edge-node-1")
    controller.sync(job)
    train = task_status(job, "train")
    assert (train["phase"], train["running"], train["nodes"], train["message"]) == (
        "Running", 1, ["edge-node-1"], "stage Train: Running")

    sedna.stage(resource, "Train", "Completed")
    sedna.stage(resource, "Eval", "Waiting")
    sedna.stage(resource, "Eval", "Ready")
    sedna.stage(resource, "Eval", "Starting")
    sedna.stage(resource, "Eval", "Failed")
    controller.sync(job)
    train, evaluation = task_status(job, "train"), task_status(job, "eval")
    assert (train["succeeded"], train["running"], "message" in train) == (1, 0, False)
    assert (evaluation["phase"], evaluation["failed"], evaluation["message"]) == ("Running", 1, "stage Eval: Failed")

    sedna.stage(resource, "Train", "Waiting")
    controller.sync(job)
    assert phase(job) == "Running", "Sedna retries from training; a failed stage fails nothing"
    assert task_status(job, "eval")["message"] == "last Eval run: Failed"
    assert condition(job, "Failed")["status"] == "False"

    for stage in ("Train", "Eval", "Deploy"):
        for kind in ("Ready", "Starting", "Running", "Completed"):
            sedna.stage(resource, stage, kind)
    controller.sync(job)
    assert phase(job) == "Running", "the loop never finishes"
    assert [task_status(job, t)["succeeded"] for t in ("train", "eval", "infer")] == [2, 1, 1]
    assert job["status"]["progress"] == "0/3"


def test_lifelong_learning_deploys_only_after_its_first_deploy_stage(controller, sedna, submit):
    job = submit(minimal("LifelongLearningJob"))
    controller.sync(job)
    resource = sedna.take(sedna.resource(job))
    controller.sync(job)
    assert task_status(job, "infer")["phase"] == "Pending"
    for kind in ("Ready", "Starting", "Running"):
        sedna.stage(resource, "Deploy", kind, node="edge-node-3")
    controller.sync(job)
    infer = task_status(job, "infer")
    assert (infer["phase"], infer["running"], infer["nodes"]) == ("Running", 1, ["edge-node-3"]), \
        "the node Sedna annotates for the stage"


def test_suspend_removes_the_sedna_resource_and_resume_recreates_it(controller, cluster, sedna, submit):
    job = submit(example("IncrementalLearningJob"))
    controller.sync(job)
    sedna.take(sedna.resource(job))
    controller.sync(job)
    cluster.update_job_spec(job, {**job["spec"], "suspend": True})
    controller.sync(job)
    assert phase(job) == "Suspended" and cluster.children_of(job) == []
    cluster.update_job_spec(job, {**job["spec"], "suspend": False})
    controller.sync(job)
    assert phase(job) == "Pending"
    assert "status" not in sedna.resource(job), "a fresh resource"


def test_a_suspended_job_creates_nothing(controller, cluster, submit):
    manifest = example("FederatedLearningJob")
    manifest["spec"]["suspend"] = True
    job = submit(manifest)
    controller.sync(job)
    assert phase(job) == "Suspended" and cluster.children_of(job) == []


def test_deadline_stops_a_running_service(controller, cluster, sedna, submit):
    manifest = example("JointInferenceService")
    manifest["spec"]["activeDeadlineSeconds"] = 600
    job = submit(manifest)
    controller.sync(job)
    sedna.serve(sedna.resource(job))
    response = controller.sync(job)
    assert response["resyncAfterSeconds"] == 600
    cluster.clock.advance(600)
    controller.sync(job)
    assert phase(job) == "Failed" and condition(job, "Failed")["reason"] == "DeadlineExceeded"
    assert cluster.children_of(job) == [], "an active Sedna resource is stopped"


def test_spec_edits_apply_when_the_sedna_resource_is_created_again(controller, cluster, sedna, submit):
    job = submit(example("JointInferenceService"))
    controller.sync(job)
    resource = sedna.serve(sedna.resource(job))
    spec = copy.deepcopy(job["spec"])
    spec["tasks"][1]["image"] = "kubeedge/sedna-example-joint-inference-helmet-detection-big:v0.4.0"
    cluster.update_job_spec(job, spec)
    controller.sync(job)
    assert sedna.resource(job) is resource and resource["spec"]["cloudWorker"]["template"]["spec"]["containers"][0][
        "image"].endswith(":v0.3.0"), "never updated (OnDelete), like pods"
    assert phase(job) == "Running" and job["status"]["observedGeneration"] == 2

    for suspend in (True, False):
        cluster.update_job_spec(job, {**job["spec"], "suspend": suspend})
        controller.sync(job)
    cloud = sedna.resource(job)["spec"]["cloudWorker"]["template"]["spec"]["containers"][0]
    assert cloud["image"].endswith(":v0.4.0")


def test_a_sedna_resource_deleted_by_someone_else_is_recreated(controller, cluster, sedna, submit):
    job = submit(example("FederatedLearningJob"))
    controller.sync(job)
    resource = sedna.start_training(sedna.resource(job))
    controller.sync(job)
    cluster.delete("FederatedLearningJob.sedna.io/v1alpha1", "team-a", resource["metadata"]["name"])
    controller.sync(job)
    assert sedna.resource(job)["metadata"]["uid"] != resource["metadata"]["uid"]


def test_without_the_component_the_job_waits_with_a_clear_reason(cluster, app, submit):
    controller = Controller(cluster, FlaskTransport(app), controller=load_controller())
    job = submit(example("LifelongLearningJob"))
    response = controller.sync(job)
    assert response["children"] == []
    progressing = condition(job, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "RuntimeUnavailable")
    assert "(runtime sedna): install the component manifests/components/sedna" in progressing["message"]
    assert "LifelongLearningJob.sedna.io/v1alpha1" in progressing["message"]


def test_an_invalid_sedna_job_is_reported_and_keeps_its_resource(controller, cluster, sedna, submit):
    job = submit(example("FederatedLearningJob"))
    controller.sync(job)
    sedna.start_training(sedna.resource(job))
    controller.sync(job)
    controller.validate = None  # the edit bypasses admission (e.g. the CRD predates the rule)
    spec = copy.deepcopy(job["spec"])
    spec["tasks"][1].pop("dataset")
    cluster.update_job_spec(job, spec)
    response = controller.sync(job)
    invalid = condition(job, "InvalidSpec")
    assert invalid["status"] == "True" and "spec.tasks[1].dataset: required for role training" in invalid["message"]
    assert phase(job) == "Running", "the phase keeps its last value"
    assert object_names(response["children"]) == ["surface-defect"]
    assert response["children"][0]["spec"]["trainingWorkers"][0]["dataset"] == {"name": "surface-defect-data"}


@pytest.mark.parametrize("status", [
    {"conditions": "Running"},
    {"conditions": [None, 3, {"type": 5}, {"status": "True"}], "phase": ["Running"], "failed": "1"},
    {"conditions": [{"type": "Running", "status": "True", "stage": 7, "message": None}]},
    "garbage",
])
def test_malformed_sedna_status_is_read_defensively(client, status):
    for kind in sorted(EXAMPLES):
        manifest = example(kind)
        parent = {**manifest, "metadata": {**manifest["metadata"], "uid": "u1", "generation": 1}}
        (resource,) = render(manifest, NOW)
        resource["status"] = status
        key = runtime.child_key(kind)
        body = {"parent": parent, "children": {key: {f"team-a/{resource['metadata']['name']}": resource}}}
        response = client.post("/sync", json=body)
        assert response.status_code == 200, response.get_data()
        assert response.get_json()["status"]["phase"] in ("Pending", "Running"), kind


def test_the_same_request_yields_the_same_bytes(controller, sedna, submit, client):
    job = submit(example("IncrementalLearningJob"))
    controller.sync(job)
    resource = sedna.take(sedna.resource(job))
    sedna.stage(resource, "Train", "Running", node="edge-node-1")
    controller.sync(job)
    body = controller.request(job)
    first = client.post("/sync", json=body).get_data()
    assert client.post("/sync", json=body).get_data() == first
    assert handle(body, controller.cluster.clock.now) == handle(copy.deepcopy(body), controller.cluster.clock.now)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_crd_defaults_match_the_model(crd_validator, kind):
    for manifest in (example(kind), minimal(kind)):
        manifest["spec"]["sedna"].update(
            {"transmitter": {}} if kind == FL else {"modelHotUpdate": {}} if kind == IL else {})
        assert parse_job(crd_validator.defaulted(manifest)) == parse_job(manifest)


def test_docs_cover_every_role_setting_and_example():
    text = (ROOT / "docs" / "sedna.md").read_text()
    for key in SEDNA_SETTINGS:
        assert f"`{key}`" in text, key
    for kind, roles in SEDNA_ROLE_RULES.items():
        assert f"### {kind}" in text, kind
        for role in roles:
            assert f"`{role}`" in text, role
    for path in EXAMPLES.values():
        assert f"(../examples/{path.name})" in text, path.name
    assert "[Sedna jobs](docs/sedna.md)" in (ROOT / "README.md").read_text()
