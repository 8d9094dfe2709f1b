"""The image: its Dockerfile parsed, and its start command run the way the image runs it.

No container engine here: the test runs the image's ENTRYPOINT with the
image's environment, a working directory it cannot write to (unless run as
root), a HOME that does
not exist and a private TMPDIR (the Deployment's only writable volume), then
checks that it served, answered its own health check, and wrote nothing
outside TMPDIR — and left TMPDIR clean.
"""

from __future__ import annotations

import json
import stat
import subprocess

import pytest

from hooks.config import OPTIONS
from tests.driver import ROOT
from tests.servers import command, environment, free_port, hook_server
from tests.test_manifests import BASE, MANIFESTS, dockerfile_stages, env_of, load_docs, load_one
from tests.test_ops_auth import REQUEST

FINAL = dockerfile_stages()[-1]
IMAGE_ENV = env_of(FINAL)


def instructions(keyword: str) -> list[str]:
    return [args for kw, args in FINAL if kw == keyword]


def test_final_stage_runs_the_server_as_non_root_without_pip():
    assert json.loads(instructions("ENTRYPOINT")[-1]) == ["decice-hooks"]
    assert instructions("USER")[-1] == "10001:10001"
    assert IMAGE_ENV["TMPDIR"] == "/tmp" and IMAGE_ENV["PYTHONDONTWRITEBYTECODE"] == "1"
    (install,) = [run for run in instructions("RUN") if "pip install" in run]
    assert "--no-index" in install and "pip uninstall --yes pip setuptools wheel" in install
    assert "--mount=type=bind,from=builder" in install


def test_image_environment_is_valid_configuration():
    proc = subprocess.run([*command(), "--check-config"], env=environment(IMAGE_ENV), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["bind"] == IMAGE_ENV["DECICE_HOOKS_BIND"]


def manifest_env_names() -> set[str]:
    names = set()
    for path in [BASE / "deployment.yaml", *sorted((MANIFESTS / "components").glob("*/kustomization.yaml"))]:
        text = path.read_text(encoding="utf-8")
        names.update(word.strip(":,\"'") for word in text.split() if word.strip(":,\"'").startswith("DECICE_HOOKS_"))
    return names


def test_manifests_set_only_known_settings():
    known = {option.env for option in OPTIONS}
    names = manifest_env_names()
    assert {"DECICE_HOOKS_BIND", "DECICE_HOOKS_AUTH_TOKEN_FILE", "DECICE_HOOKS_TLS_CERT_FILE"} <= names
    assert names <= known


def test_deployment_environment_is_valid_configuration():
    container = load_one(BASE / "deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    env = {**IMAGE_ENV, **{e["name"]: e["value"] for e in container["env"]}}
    proc = subprocess.run([*command(), "--check-config"], env=environment(env), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def sandbox(tmp_path):
    """A read-only working directory, a HOME that does not exist and a private TMPDIR."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cwd.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    yield cwd, tmp, tmp_path / "nonexistent-home"
    cwd.chmod(stat.S_IRWXU)


def test_start_command_serves_with_only_tmp_writable(tmp_path, sandbox):
    cwd, tmp, home = sandbox
    env = {**IMAGE_ENV, "TMPDIR": str(tmp), "HOME": str(home), "DECICE_HOOKS_WORKERS": "2"}
    logs = tmp_path / "logs"
    logs.mkdir()
    with hook_server(logs, env=env, cwd=cwd) as server:
        assert server.request("/healthz")[0] == 200
        assert server.request("/sync", json.dumps(REQUEST).encode())[0] == 200
        assert server.request("/metrics")[0] == 200
        check = subprocess.run([*command(), "--healthcheck", "--bind", f"0.0.0.0:{server.port}"],
                               env=environment(env), cwd=cwd, capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stderr
        assert [p.name.startswith("decice-hooks-metrics-") for p in tmp.iterdir()] == [True]
        assert all(line["level"] != "error" for line in server.log_lines())
    assert server.proc.returncode == 0
    assert list(cwd.iterdir()) == [] and not home.exists()
    assert list(tmp.iterdir()) == [], "TMPDIR is left clean"


def test_healthcheck_fails_when_nothing_answers():
    proc = subprocess.run([*command(), "--healthcheck", "--bind", f"127.0.0.1:{free_port()}"],
                          env=environment(IMAGE_ENV), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "/healthz" in proc.stderr


def test_components_mount_what_the_settings_name():
    """The auth and tls components point the settings at files inside their Secret mounts."""
    for name, files in (("auth", {"DECICE_HOOKS_AUTH_TOKEN_FILE": "/etc/decice-hooks/auth/token"}),
                        ("tls", {"DECICE_HOOKS_TLS_CERT_FILE": "/etc/decice-hooks/tls/tls.crt",
                                 "DECICE_HOOKS_TLS_KEY_FILE": "/etc/decice-hooks/tls/tls.key"}),
                        ("mtls", {"DECICE_HOOKS_TLS_CLIENT_CA_FILE": "/etc/decice-hooks/tls/ca.crt"})):
        component = load_docs(MANIFESTS / "components" / name / "kustomization.yaml")[0]
        text = json.dumps(component)
        for env, path in files.items():
            assert env in text and path in text, (name, env)
