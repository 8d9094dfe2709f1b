from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from hooks.app import create_app
from tests.driver import Cluster, Clock, Controller, FlaskTransport, Kubelet, ROOT

CRD_PATH = ROOT / "crds" / "decicejob.yaml"


def job_manifest(name: str = "demo", tasks: list[dict] | None = None, **spec: Any) -> dict:
    """A DeciceJob manifest; one task ``main`` unless ``tasks`` are given."""
    return {
        "apiVersion": "dev.decice.com/v1alpha1",
        "kind": "DeciceJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"tasks": tasks or [{"name": "main", "image": "busybox:1.36"}], **spec},
    }


def task(name: str, **fields: Any) -> dict:
    return {"name": name, "image": f"registry.example/{name}:1", **fields}


@pytest.fixture(scope="session")
def crd_validator():
    from tests.schemas import CRDValidator

    return CRDValidator.from_file(CRD_PATH)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cluster(clock: Clock) -> Cluster:
    return Cluster(clock=clock)


@pytest.fixture
def app(clock: Clock):
    return create_app(clock=clock)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def controller(cluster: Cluster, app, crd_validator) -> Controller:
    """Metacontroller (v2 hooks) against the app in-process; every status it writes and every
    child it creates is validated (the parent against the CRD, children against Kubernetes)."""
    from tests.schemas import builtin_errors

    def validate(job: dict) -> list[str]:
        errors = crd_validator.errors(job)
        for child in cluster.children_of(job):
            if child["apiVersion"] == "v1":
                errors += [f"{child['kind']} {child['metadata']['name']}: {e}" for e in builtin_errors(child)]
        return errors

    return Controller(cluster, FlaskTransport(app), validate=validate)


@pytest.fixture
def kubelet(cluster: Cluster) -> Kubelet:
    return Kubelet(cluster)


@pytest.fixture
def submit(cluster: Cluster) -> Callable[..., dict]:
    def make(manifest: dict | None = None, **kwargs: Any) -> dict:
        return cluster.create_job(copy.deepcopy(manifest or job_manifest(**kwargs)))

    return make
