"""The spec model: defaults, normalisation and every error at once."""

from __future__ import annotations

import pytest

from hooks.model import InvalidSpec, Port, Resources, parse_job
from tests.conftest import job_manifest, task


def test_defaults():
    job = parse_job(job_manifest())
    assert (job.name, job.namespace) == ("demo", "team-a")
    spec = job.spec
    assert spec.runtime == "kubernetes" and spec.backoff_limit == 3 and not spec.suspend
    (main,) = spec.tasks
    assert (main.replicas, main.restart_policy, main.runtime) == (1, "Never", "kubernetes")
    assert main.resources == Resources()


def test_task_runtime_inherits_the_job_runtime():
    job = parse_job(job_manifest(runtime="volcano", tasks=[task("a"), task("b", runtime="kubernetes")]))
    assert [t.runtime for t in job.spec.tasks] == ["volcano", "kubernetes"]


@pytest.mark.parametrize("resources, requests, limits", [
    ({"cpu": 2, "memory": "4Gi"}, {"cpu": "2", "memory": "4Gi"}, {"cpu": "2", "memory": "4Gi"}),
    ({"gpu": 2}, {"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "2"}),
    ({"gpu": 0, "cpu": 0.5}, {"cpu": "0.5"}, {"cpu": "0.5"}),
    ({"extended": {"example.com/fpga": 1}}, {"example.com/fpga": "1"}, {"example.com/fpga": "1"}),
    ({"cpu": 1, "requests": {"memory": "1Gi"}}, {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
    ({"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}}, {"cpu": "500m"}, {"cpu": "2"}),
])
def test_resources_requests_equal_limits_unless_both_given(resources, requests, limits):
    job = parse_job(job_manifest(tasks=[task("a", resources=resources)]))
    assert job.spec.tasks[0].resources == Resources(requests=requests, limits=limits)


def test_ports_and_placement():
    job = parse_job(job_manifest(tasks=[task("a", replicas=5, ports=[{"containerPort": 80}],
                                             placement={"nodes": ["n1", "n2"]})]))
    (a,) = job.spec.tasks
    assert a.ports == (Port(80, "TCP"),)
    assert [a.placement.node_for(i) for i in range(5)] == ["n1", "n2", "n1", "n2", "n1"]


def test_every_error_is_reported_with_its_path():
    manifest = job_manifest(tasks=[
        task("a", replicas=0, resources={"memory": "lots"}, volumeMounts=[{"volume": "x", "mountPath": "rel"}]),
        task("B"),
    ], backoffLimit=-1)
    with pytest.raises(InvalidSpec) as caught:
        parse_job(manifest)
    text = "\n".join(caught.value.errors)
    for fragment in ("spec.tasks[0].replicas", "spec.tasks[0].resources.memory", "spec.tasks[0].volumeMounts[0].mountPath",
                     "spec.tasks[1].name", "spec.backoffLimit"):
        assert fragment in text


@pytest.mark.parametrize("manifest, fragment", [
    (job_manifest(tasks=[task("a", dependsOn=["b"]), task("b", dependsOn=["a"])]), "dependency cycle a -> b -> a"),
    (job_manifest(name="Upper"), "metadata.name"),
    ({"metadata": {"name": "x"}}, "spec"),
    ({"metadata": {"name": "x"}, "spec": []}, "spec: must be an object"),
    ("not a dict", "parent"),
    (job_manifest(tasks=[task("a", unknownField=1)]), "unknownField"),
    (job_manifest(tasks=[task("a", replicas="3")]), "replicas"),
    (job_manifest(tasks=[task("a", replicas=True)]), "replicas"),
    (job_manifest(tasks=[task("a", env=[{"value": "x"}])]), "env"),
    (job_manifest(tasks=[task("a", volumeMounts=[{"volume": "v", "mountPath": "/a"}, {"volume": "v", "mountPath": "/a"}])],
                  volumes=[{"name": "v", "size": "1Gi"}]), "duplicate mountPath"),
    (job_manifest(runtime="sedna", sedna={"kind": "FederatedLearningJob"}, tasks=[task("a", runtime="kubernetes")]),
     "cannot override"),
])
def test_invalid(manifest, fragment):
    with pytest.raises(InvalidSpec) as caught:
        parse_job(manifest)
    assert fragment in str(caught.value)


def test_memoized_parser_agrees_with_parse_job_and_sees_every_change():
    from hooks.model import memoized_parser

    parse = memoized_parser(size=4)
    manifest = job_manifest(tasks=[task("a", replicas=2)])
    first = parse(manifest)
    assert first == parse_job(manifest)
    assert parse(job_manifest(tasks=[task("a", replicas=2)])) is first, "the same parent is parsed once"
    changed = job_manifest(tasks=[task("a", replicas=3)])
    assert parse(changed).spec.tasks[0].replicas == 3
    renamed = job_manifest(name="other", tasks=[task("a", replicas=2)])
    assert parse(renamed).name == "other"
    bad = job_manifest(tasks=[task("a", replicas=0)])
    for _ in range(2):
        with pytest.raises(InvalidSpec):
            parse(bad)
    with pytest.raises(InvalidSpec):
        parse("not a parent")
