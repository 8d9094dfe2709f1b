"""The security components (auth, tls, mtls, metrics) on top of manifests/base.

The components' JSON patches are applied here the way kustomize applies them
(add / replace, RFC 6901 paths), so the wiring is checked without kubectl;
with kubectl, ``kubectl kustomize`` must render the same objects.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.test_manifests import BASE, CRDS, MANIFESTS, find, kustomize, listed_resource_files, load_docs, needs_kubectl

COMPONENTS = MANIFESTS / "components"
SECURITY = ("auth", "tls", "mtls", "metrics")


def _step(token: str) -> str | int:
    token = token.replace("~1", "/").replace("~0", "~")
    return int(token) if token.isdigit() else token


def apply_patch(obj: dict, operations: list[dict]) -> None:
    for op in operations:
        *parents, last = [_step(t) for t in op["path"].lstrip("/").split("/")]
        target = obj
        for step in parents:
            target = target[step]
        if op["op"] == "add" and last == "-":
            target.append(copy.deepcopy(op["value"]))
        elif op["op"] == "add" and isinstance(target, list):
            target.insert(last, copy.deepcopy(op["value"]))
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace":
                assert last in target or isinstance(target, list), f"replace of missing {op['path']}"
            target[last] = copy.deepcopy(op["value"])
        else:
            raise AssertionError(f"unsupported op {op['op']}")


def build(*components: str) -> list[dict]:
    """manifests/base plus ``components``, applied in order."""
    objects = [doc for path in listed_resource_files(BASE) for doc in load_docs(path)]
    for name in components:
        kust = load_docs(COMPONENTS / name / "kustomization.yaml")[0]
        assert kust["kind"] == "Component"
        for resource in kust.get("resources") or []:
            objects += load_docs(COMPONENTS / name / resource)
        for patch in kust.get("patches") or []:
            target = patch["target"]
            matches = [o for o in objects if o["kind"] == target["kind"] and o["metadata"]["name"] == target["name"]]
            assert len(matches) == 1, (name, target)
            apply_patch(matches[0], yaml.safe_load(patch["patch"]))
    return objects


def get(objects: list[dict], kind: str, name: str) -> dict:
    return find(objects, kind, name)


def container_of(objects: list[dict]) -> dict:
    return get(objects, "Deployment", "decice-hooks")["spec"]["template"]["spec"]["containers"][0]


def env_of(objects: list[dict]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container_of(objects)["env"]}


def mounted_secret(objects: list[dict], path: str) -> tuple[str, str]:
    """(Secret name, key) behind a file path in the hook container."""
    pod = get(objects, "Deployment", "decice-hooks")["spec"]["template"]["spec"]
    for mount in container_of(objects)["volumeMounts"]:
        if path.startswith(mount["mountPath"] + "/"):
            volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
            assert mount.get("readOnly") is True
            assert volume["secret"]["defaultMode"] == 0o440 and pod["securityContext"]["fsGroup"] == 10001
            return volume["secret"]["secretName"], path[len(mount["mountPath"]) + 1:]
    raise AssertionError(f"{path} is not in a mounted volume")


def hooks_of(objects: list[dict]) -> dict[str, dict]:
    controller = get(objects, "CompositeController", "decicejob-controller")
    return {name: hook["webhook"] for name, hook in controller["spec"]["hooks"].items()}


def test_base_is_plain_http_with_scrape_annotations():
    objects = build()
    template = get(objects, "Deployment", "decice-hooks")["spec"]["template"]
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "8080",
                                                   "prometheus.io/path": "/metrics"}
    for webhook in hooks_of(objects).values():
        assert urlsplit(webhook["url"]).scheme == "http" and "authorization" not in webhook


def test_auth_wires_one_secret_into_both_sides():
    objects = build("auth")
    secret, key = mounted_secret(objects, env_of(objects)["DECICE_HOOKS_AUTH_TOKEN_FILE"])
    for webhook in hooks_of(objects).values():
        assert webhook["authorization"] == {"type": "Bearer", "secretRef": {
            "name": secret, "namespace": "decice-system", "key": key}}


def test_tls_serves_https_and_metacontroller_trusts_the_ca():
    objects = build("tls")
    env = env_of(objects)
    cert_secret, cert_key = mounted_secret(objects, env["DECICE_HOOKS_TLS_CERT_FILE"])
    key_secret, key_key = mounted_secret(objects, env["DECICE_HOOKS_TLS_KEY_FILE"])
    assert (cert_secret, cert_key, key_secret, key_key) == ("decice-hooks-tls", "tls.crt", "decice-hooks-tls", "tls.key")
    service = get(objects, "Service", "decice-hooks")
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (443, "https")
    container = container_of(objects)
    assert container["ports"][0]["name"] == "https"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS" and container[probe]["httpGet"]["port"] == "https"
    template = get(objects, "Deployment", "decice-hooks")["spec"]["template"]
    assert template["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
    for name, webhook in hooks_of(objects).items():
        url = urlsplit(webhook["url"])
        assert (url.scheme, url.hostname, url.port or 443, url.path) == (
            "https", "decice-hooks.decice-system", port["port"], f"/{name}")
        assert webhook["caBundle"] == {"secretRef": {"name": cert_secret, "namespace": "decice-system",
                                                     "key": "ca.crt"}}


def test_mtls_adds_client_certificates_on_both_sides():
    objects = build("tls", "mtls")
    secret, key = mounted_secret(objects, env_of(objects)["DECICE_HOOKS_TLS_CLIENT_CA_FILE"])
    assert (secret, key) == ("decice-hooks-tls", "ca.crt")
    for webhook in hooks_of(objects).values():
        assert webhook["clientTLS"] == {"secretRef": {"name": "decice-hooks-client-tls", "namespace": "decice-system"}}
        assert webhook["caBundle"]["secretRef"]["name"] == secret


def test_metrics_component_admits_prometheus_to_the_hook_port():
    objects = build("metrics")
    policy = get(objects, "NetworkPolicy", "decice-hooks-metrics")
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8080}]
    assert policy["spec"]["podSelector"] == get(objects, "NetworkPolicy", "decice-hooks")["spec"]["podSelector"]


@pytest.mark.parametrize("components", [(), ("auth",), ("tls",), ("tls", "mtls"), SECURITY])
def test_built_in_objects_stay_valid(components):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for obj in build(*components):
        if obj["apiVersion"].split("/")[0] not in ("metacontroller.k8s.io", "dev.decice.com", "apiextensions.k8s.io"):
            kubernetes_validate.validate(obj, "1.32", strict=True)


@needs_kubectl
def test_kustomize_renders_the_same(tmp_path: Path):
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    shutil.copytree(CRDS, tmp_path / "crds")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(tmp_path / "manifests" / "base", overlay)],
        "components": [os.path.relpath(tmp_path / "manifests" / "components" / c, overlay) for c in SECURITY],
    }))
    rendered = kustomize(overlay)
    ours = build(*SECURITY)
    for kind, name in (("Deployment", "decice-hooks"), ("CompositeController", "decicejob-controller"),
                       ("Service", "decice-hooks"), ("NetworkPolicy", "decice-hooks-metrics")):
        theirs = copy.deepcopy(get(rendered, kind, name)["spec"])
        mine = get(ours, kind, name)["spec"]
        theirs.get("template", {}).get("metadata", {}).pop("labels", None)  # base adds part-of here
        mine = {**mine, "template": {**mine["template"], "metadata": {
            k: v for k, v in mine["template"]["metadata"].items() if k != "labels"}}} if "template" in mine else mine
        assert theirs == mine, (kind, name)
