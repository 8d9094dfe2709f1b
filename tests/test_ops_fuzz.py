"""Malformed requests, many of them: always a 4xx with a JSON error, or a valid answer — never a 500.

The cases are generated from a real v2 hook request (a running job with
observed pods, a Service and a claim) by a seeded generator: random bytes,
truncations, every value of the request removed and replaced by two values of
other types (picked by the generator), huge strings, deep nesting, duplicate keys and non-object
children.  A well-formed request whose spec became invalid must take the
InvalidSpec path: every observed child kept.  Part of it runs against the real
server, which must lose no worker.
"""

from __future__ import annotations

import json
import random
from typing import Any, Iterator

import orjson
import pytest

from hooks.app import create_app
from tests.conftest import job_manifest, task
from tests.driver import Cluster, Clock, Controller, FlaskTransport, Kubelet
from tests.servers import hook_server

SEED = 20240607
WRONG_VALUES: tuple[Any, ...] = (None, True, -1, 1.5, "", "x" * 70_000, [], {}, [[["deep"]]], {"a": {"b": {}}})


def base_request() -> dict:
    """What Metacontroller sends for a running two-task job with a volume."""
    clock = Clock()
    cluster = Cluster(clock=clock)
    controller = Controller(cluster, FlaskTransport(create_app(clock=clock)))
    job = cluster.create_job(job_manifest(
        tasks=[task("a", replicas=2, volumeMounts=[{"volume": "work", "mountPath": "/work"}],
                    env=[{"name": "X", "value": "1"}], ports=[{"containerPort": 80}]),
               task("b", dependsOn=["a"])],
        volumes=[{"name": "work", "size": "1Gi"}]))
    controller.sync(job)
    Kubelet(cluster).run_all(cluster.pods(job))
    controller.sync(job)
    return controller.request(job)


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, prefix + (index,))


def replaced(body: dict, path: tuple, value: Any) -> dict:
    copy = json.loads(json.dumps(body))
    if not path:
        return None if value is KeyError else value
    target = copy
    for step in path[:-1]:
        target = target[step]
    if value is KeyError and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = None if value is KeyError else value
    return copy


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"v": [value]}
    return value


def cases(body: dict) -> Iterator[tuple[str, bytes]]:
    rng = random.Random(SEED)
    raw = orjson.dumps(body)
    for i in range(150):
        yield f"random-bytes-{i}", bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 400)))
    for i in range(60):
        yield f"truncated-{i}", raw[: rng.randrange(0, len(raw))]
    for path in paths(body):
        if path[:1] == ("controller",) and len(path) > 1:
            continue  # the CompositeController's own spec: the hook does not read it
        for value in (KeyError, *rng.sample(WRONG_VALUES, 2)):
            yield f"{'/'.join(map(str, path))}={str(value)[:20]}", orjson.dumps(replaced(body, path, value))
    yield "deep-array", b"[" * 100_000 + b"]" * 100_000
    yield "deep-object", b'{"a":' * 50_000 + b"1" + b"}" * 50_000
    # Deeper than orjson writes (255 levels), shallower than it reads (1024).
    yield "deep-in-spec-env", json.dumps(replaced(body, ("parent", "spec", "tasks", 0, "env", 0),
                                                  {"name": "X", "valueFrom": nested(200)})).encode()
    yield "deep-in-observed-pod", json.dumps(replaced(body, ("children", "Pod.v1", "team-a/demo-a-0", "spec",
                                                             "extra"), nested(200))).encode()
    yield "huge-name", orjson.dumps(replaced(body, ("parent", "metadata", "name"), "n" * 1_000_000))
    yield "huge-image", orjson.dumps(replaced(body, ("parent", "spec", "tasks", 0, "image"), "i" * 1_000_000))
    yield "duplicate-keys", b'{"parent": 1, "children": {}, "parent": ' + orjson.dumps(body["parent"]) + b"}"
    yield "duplicate-keys-in-spec", raw.replace(b'"tasks":', b'"tasks":"first","tasks":', 1)
    yield "nan", raw.replace(b'"generation":1', b'"generation":NaN', 1)
    yield "big-int", raw.replace(b'"generation":1', b'"generation":123456789012345678901234567890', 1)
    yield "bad-utf8", raw.replace(b'"demo"', b'"d\xffmo"', 1)
    yield "utf16", json.dumps(body).encode("utf-16")
    yield "children-list", orjson.dumps({**body, "children": [1, 2]})
    yield "child-group-list", orjson.dumps({**body, "children": {"Pod.v1": ["a"]}})
    yield "child-not-object", orjson.dumps({**body, "children": {"Pod.v1": {"team-a/x": "pod"}}})
    yield "child-without-metadata", orjson.dumps({**body, "children": {"Pod.v1": {"team-a/x": {"kind": "Pod"}}}})


def observed_names(body: Any) -> list[str] | None:
    """The names an InvalidSpec answer must keep: observed children in the parent's namespace."""
    try:
        namespace = body["parent"]["metadata"].get("namespace", "default")
        groups = body.get("children") or {}
        return sorted(obj["metadata"]["name"] for group in groups.values() for obj in (group or {}).values()
                      if obj["metadata"].get("namespace", namespace) == namespace)
    except (AttributeError, KeyError, TypeError):
        return None


def reason(answer: dict) -> str:
    return next(c["reason"] for c in answer["status"]["conditions"] if c["type"] == "Progressing")


def check(label: str, data: bytes, status: int, payload: bytes) -> None:
    assert status in (200, 400), f"{label}: status {status}: {payload[:300]!r}"
    answer = json.loads(payload)
    if status == 400:
        assert set(answer) == {"error", "message"} and answer["error"] in ("MalformedJSON", "BadRequest"), label
        return
    assert isinstance(answer["status"], dict) and isinstance(answer["children"], list), label
    body = orjson.loads(data)
    namespace = body["parent"]["metadata"].get("namespace", "default")
    assert all(c["metadata"]["namespace"] == namespace for c in answer["children"]), label
    if reason(answer) == "InvalidSpec":
        assert sorted(c["metadata"]["name"] for c in answer["children"]) == observed_names(body), label


@pytest.fixture(scope="module")
def all_cases() -> list[tuple[str, bytes]]:
    return list(cases(base_request()))


def test_every_malformed_request_gets_a_4xx_or_a_valid_answer(all_cases):
    client = create_app().test_client()
    statuses = {200: 0, 400: 0}
    invalid_with_pods = 0
    for label, data in all_cases:
        response = client.post("/sync", data=data, content_type="application/json")
        check(label, data, response.status_code, response.get_data())
        statuses[response.status_code] += 1
        if response.status_code == 200 and reason(response.get_json()) == "InvalidSpec":
            invalid_with_pods += any(c["kind"] == "Pod" for c in response.get_json()["children"])
    assert len(all_cases) > 1000 and statuses[200] > 250 and statuses[400] > 200
    assert invalid_with_pods > 20, "the InvalidSpec path was reached with pods observed"


def test_real_server_survives_the_fuzz(tmp_path, all_cases):
    sample = all_cases[::15] + [c for c in all_cases if not c[0][0].isalpha() or c[0].startswith(("deep", "huge"))]
    with hook_server(tmp_path, env={"DECICE_HOOKS_WORKERS": "2", "DECICE_HOOKS_THREADS": "2"}) as server:
        workers = server.count("Booting worker")
        for label, data in sample:
            status, _, payload = server.request("/sync", data)
            check(label, data, status, payload)
        assert server.request("/healthz")[0] == 200
        assert server.count("Booting worker") == workers, "no worker died"
        assert not [line for line in server.log_lines() if line["level"] in ("error", "critical")]
