"""HTTPS and client certificates, against the real server with certificates made for the test."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request

import pytest

from tests.certs import make_certs
from tests.driver import ROOT, Cluster, Controller, HTTPTransport
from tests.servers import command, environment, hook_server
from tests.test_ops_auth import REQUEST

BODY = json.dumps(REQUEST).encode()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def client_context(certs, cert=None, key=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def tls_env(certs, client_ca: bool = False) -> dict[str, str]:
    env = {"DECICE_HOOKS_TLS_CERT_FILE": str(certs.server_cert), "DECICE_HOOKS_TLS_KEY_FILE": str(certs.server_key),
           "DECICE_HOOKS_WORKERS": "1", "DECICE_HOOKS_THREADS": "2"}
    if client_ca:
        env["DECICE_HOOKS_TLS_CLIENT_CA_FILE"] = str(certs.ca)
    return env


class TLSTransport(HTTPTransport):
    def __init__(self, base_url: str, context: ssl.SSLContext):
        super().__init__(base_url)
        self.context = context

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base_url + path, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


def test_https_serves_hooks_and_probes(tmp_path, certs):
    with hook_server(tmp_path, env=tls_env(certs), context=client_context(certs)) as server:
        assert server.request("/readyz")[0] == 200
        cluster = Cluster()
        controller = Controller(cluster, TLSTransport(server.url, server.context))
        job = cluster.create_job({"apiVersion": "dev.decice.com/v1alpha1", "kind": "DeciceJob",
                                  "metadata": {"name": "tls", "namespace": "team-a"},
                                  "spec": {"tasks": [{"name": "main", "image": "busybox:1.36"}]}})
        controller.sync(job)
        assert [p["metadata"]["name"] for p in cluster.pods(job)] == ["tls-main-0"]
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5)
        proc = subprocess.run([*command(), "--healthcheck", "--bind", f"0.0.0.0:{server.port}"], cwd=ROOT,
                              env=environment(tls_env(certs)), capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr


def test_client_certificates(tmp_path, certs):
    anonymous = client_context(certs)
    with hook_server(tmp_path, env=tls_env(certs, client_ca=True), context=anonymous) as server:
        for path in ("/healthz", "/readyz", "/metrics"):
            assert server.request(path)[0] == 200, path
        status, _, body = server.request("/sync", BODY)
        assert status == 401 and json.loads(body)["error"] == "ClientCertificateRequired"

        server.context = client_context(certs, certs.client_cert, certs.client_key)
        status, _, body = server.request("/sync", BODY)
        assert status == 200 and json.loads(body)["children"]

        server.context = client_context(certs, certs.stranger_cert, certs.stranger_key)
        with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
            server.request("/sync", BODY)
        server.context = anonymous
        assert server.request("/healthz")[0] == 200


def served_certificate(port: int, context: ssl.SSLContext) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert()["serialNumber"]


def test_renewed_certificate_is_served_without_restart(tmp_path, certs):
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(certs.server_cert, live / "tls.crt")
    shutil.copy(certs.server_key, live / "tls.key")
    env = {**tls_env(certs), "DECICE_HOOKS_TLS_CERT_FILE": str(live / "tls.crt"),
           "DECICE_HOOKS_TLS_KEY_FILE": str(live / "tls.key")}
    with hook_server(tmp_path, env=env, context=client_context(certs)) as server:
        before = served_certificate(server.port, server.context)
        shutil.copy(certs.renewed_key, live / "tls.key")
        shutil.copy(certs.renewed_cert, live / "tls.crt")
        after = served_certificate(server.port, server.context)
        assert before != after
        assert server.request("/healthz")[0] == 200
