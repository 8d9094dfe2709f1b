"""Settings: environment variables and flags, validated at start-up with one clear line."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from hooks import config
from hooks.config import ConfigError, OPTIONS
from hooks.policy import Policy
from tests.certs import make_certs
from tests.driver import ROOT
from tests.servers import command, environment

DOC = ROOT / "docs" / "operations.md"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_defaults():
    settings = config.load([], {})
    assert settings.bind == "0.0.0.0:8080"
    assert (settings.workers, settings.threads, settings.timeout, settings.request_timeout) == (2, 4, 30, 15)
    assert (settings.log_level, settings.log_format) == ("info", "json")
    assert settings.max_body_bytes == 64 * 1024 * 1024
    assert settings.etag is True
    assert settings.auth_token_file is None and not settings.tls and settings.tls_client_ca_file is None
    assert settings.policy == Policy()


def test_environment_and_flags_flags_win():
    env = {"DECICE_HOOKS_WORKERS": "3", "DECICE_HOOKS_THREADS": "5", "DECICE_HOOKS_LOG_FORMAT": "TEXT",
           "DECICE_HOOKS_MAX_BODY_SIZE": "10Mi", "DECICE_HOOKS_ETAG": "off"}
    settings = config.load(["--workers", "7", "--bind", "127.0.0.1:9000"], env)
    assert settings.workers == 7 and settings.threads == 5 and settings.bind == "127.0.0.1:9000"
    assert settings.log_format == "text" and settings.max_body_bytes == 10 * 2**20 and settings.etag is False


def test_policy_switches():
    settings = config.load([], {
        "DECICE_HOOKS_ALLOW_PRIVILEGED": "true",
        "DECICE_HOOKS_ALLOWED_SERVICE_ACCOUNTS": "builder, team-a/deployer ,",
        "DECICE_HOOKS_EDGE_TOLERATIONS": '[{"key": "node-role.kubernetes.io/edge", "operator": "Exists", '
                                         '"effect": "NoSchedule"}]',
    })
    policy = settings.policy
    assert policy.allow_privileged is True
    assert policy.allowed_service_accounts == frozenset({"builder", "team-a/deployer"})
    assert policy.edge_tolerations == ({"key": "node-role.kubernetes.io/edge", "operator": "Exists",
                                        "effect": "NoSchedule"},)
    yaml_form = config.load(["--edge-tolerations", "- {key: edge, operator: Equal, value: x, effect: NoExecute,"
                                                   " tolerationSeconds: 30}"], {})
    assert yaml_form.edge_tolerations == ({"key": "edge", "operator": "Equal", "value": "x", "effect": "NoExecute",
                                           "tolerationSeconds": 30},)


@pytest.mark.parametrize("text, expected", [
    ("1048576", 1048576), ("64Mi", 64 * 2**20), ("10M", 10**7), ("2Gi", 2 * 2**30), ("1Ki", 1024), ("5k", 5000),
])
def test_byte_sizes(text, expected):
    assert config.byte_size(text) == expected


@pytest.mark.parametrize("env, fragment", [
    ({"DECICE_HOOKS_WORKERS": "0"}, "DECICE_HOOKS_WORKERS: must be at least 1"),
    ({"DECICE_HOOKS_THREADS": "many"}, "DECICE_HOOKS_THREADS: must be a whole number"),
    ({"DECICE_HOOKS_TIMEOUT": "-5"}, "DECICE_HOOKS_TIMEOUT: must be at least 1"),
    ({"DECICE_HOOKS_REQUEST_TIMEOUT": ""}, "DECICE_HOOKS_REQUEST_TIMEOUT: must be a whole number"),
    ({"DECICE_HOOKS_BIND": "8080"}, "DECICE_HOOKS_BIND: must be HOST:PORT"),
    ({"DECICE_HOOKS_BIND": "0.0.0.0:99999"}, "DECICE_HOOKS_BIND: must be HOST:PORT"),
    ({"DECICE_HOOKS_LOG_LEVEL": "loud"}, "DECICE_HOOKS_LOG_LEVEL: must be one of debug, info"),
    ({"DECICE_HOOKS_LOG_FORMAT": "xml"}, "DECICE_HOOKS_LOG_FORMAT: must be one of json, text"),
    ({"DECICE_HOOKS_MAX_BODY_SIZE": "64MB"}, "DECICE_HOOKS_MAX_BODY_SIZE: must be a size"),
    ({"DECICE_HOOKS_MAX_BODY_SIZE": "10"}, "must be at least 1024 bytes"),
    ({"DECICE_HOOKS_ETAG": "maybe"}, "DECICE_HOOKS_ETAG: must be true or false"),
    ({"DECICE_HOOKS_ALLOW_PRIVILEGED": "2"}, "DECICE_HOOKS_ALLOW_PRIVILEGED: must be true or false"),
    ({"DECICE_HOOKS_ALLOWED_SERVICE_ACCOUNTS": "Bad_Name"}, "'Bad_Name' is not a service account name"),
    ({"DECICE_HOOKS_ALLOWED_SERVICE_ACCOUNTS": "a/b/c"}, "'a/b/c' is not a service account name"),
    ({"DECICE_HOOKS_EDGE_TOLERATIONS": "{key: x}"}, "must be a list of tolerations"),
    ({"DECICE_HOOKS_EDGE_TOLERATIONS": "[{operator: Sometimes}]"}, "invalid toleration"),
    ({"DECICE_HOOKS_EDGE_TOLERATIONS": "[{key: x, operator: Exists, value: y}]"}, "Exists takes no value"),
    ({"DECICE_HOOKS_EDGE_TOLERATIONS": "[{unknown: 1}]"}, "invalid toleration"),
    ({"DECICE_HOOKS_EDGE_TOLERATIONS": "[: :"}, "is not valid JSON or YAML"),
    ({"DECICE_HOOKS_AUTH_TOKEN_FILE": "/nonexistent/token"}, "auth token file: cannot read /nonexistent/token"),
    ({"DECICE_HOOKS_TLS_CERT_FILE": "/x.crt"}, "TLS needs both a certificate and a key"),
    ({"DECICE_HOOKS_TLS_CLIENT_CA_FILE": "/ca.crt"}, "needs TLS"),
])
def test_bad_values_name_the_setting(env, fragment):
    with pytest.raises(ConfigError) as caught:
        config.load([], env)
    message = str(caught.value)
    assert fragment in message and "\n" not in message


def test_flag_errors_name_the_flag():
    with pytest.raises(ConfigError, match=r"^--workers: must be at least 1"):
        config.load(["--workers", "0"], {"DECICE_HOOKS_WORKERS": "4"})


def test_token_file_must_hold_a_token(tmp_path):
    empty = tmp_path / "token"
    empty.write_text("\n  \n")
    with pytest.raises(ConfigError, match="holds no token"):
        config.load([], {"DECICE_HOOKS_AUTH_TOKEN_FILE": str(empty)})
    empty.write_text("s3cret\n")
    assert config.load([], {"DECICE_HOOKS_AUTH_TOKEN_FILE": str(empty)}).auth_token_file == str(empty)


def test_tls_files_are_loaded_at_start(certs):
    good = {"DECICE_HOOKS_TLS_CERT_FILE": str(certs.server_cert), "DECICE_HOOKS_TLS_KEY_FILE": str(certs.server_key)}
    assert config.load([], good).tls
    assert config.load([], {**good, "DECICE_HOOKS_TLS_CLIENT_CA_FILE": str(certs.ca)}).tls_client_ca_file
    with pytest.raises(ConfigError, match="cannot load TLS certificate"):
        config.load([], {**good, "DECICE_HOOKS_TLS_KEY_FILE": str(certs.other_key)})
    with pytest.raises(ConfigError, match="cannot load TLS client CA"):
        config.load([], {**good, "DECICE_HOOKS_TLS_CLIENT_CA_FILE": str(certs.server_key)})


def test_public_view_shows_paths_not_secrets(tmp_path):
    token = tmp_path / "token"
    token.write_text("very-secret-token\n")
    public = config.load([], {"DECICE_HOOKS_AUTH_TOKEN_FILE": str(token),
                              "DECICE_HOOKS_ALLOWED_SERVICE_ACCOUNTS": "b,a"}).public()
    assert public["auth_token_file"] == str(token)
    assert public["allowed_service_accounts"] == ["a", "b"]
    assert "very-secret-token" not in json.dumps(public)
    assert set(public) == {o.field for o in OPTIONS}


# --- the decice-hooks command ---------------------------------------------------------------


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*command(), *args], env=environment(env), cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_bad_setting_stops_the_start_with_one_line():
    proc = run(env={"DECICE_HOOKS_WORKERS": "zero"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "decice-hooks: invalid setting: DECICE_HOOKS_WORKERS: must be a whole number, got 'zero'"]
    assert "Traceback" not in proc.stderr


def test_bad_flag_and_missing_file_stop_the_start():
    proc = run("--tls-cert-file", "/nonexistent.crt", "--tls-key-file", "/nonexistent.key")
    assert proc.returncode == 2 and "cannot load TLS certificate /nonexistent.crt" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run("--no-such-flag")
    assert proc.returncode == 2 and "unrecognized arguments: --no-such-flag" in proc.stderr


def test_help_documents_every_setting():
    proc = run("--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for option in OPTIONS:
        assert option.flag in text and option.env in text, option.field
    assert "--check-config" in text and "--healthcheck" in text


def test_check_config_prints_the_effective_settings():
    proc = run("--check-config", "--threads", "3", env={"DECICE_HOOKS_LOG_LEVEL": "debug"})
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["threads"] == 3 and shown["log_level"] == "debug" and shown["workers"] == 2


# --- the documented table ---------------------------------------------------------------------


def documented_rows() -> dict[str, list[str]]:
    """Rows of the settings table in docs/operations.md, keyed by environment variable."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and re.fullmatch(r"`DECICE_HOOKS_\w+`", cells[0]):
            rows[cells[0].strip("`")] = cells
    return rows


def test_operations_doc_has_one_row_per_setting():
    rows = documented_rows()
    assert set(rows) == {o.env for o in OPTIONS}
    for option in OPTIONS:
        env, flag, default, meaning = rows[option.env][:4]
        assert flag == f"`{option.flag}`", option.env
        assert default == (f"`{option.default}`" if option.default else "unset"), option.env
        assert meaning


def test_unknown_variables_are_refused_with_a_hint():
    with pytest.raises(ConfigError, match=r"^DECICE_HOOKS_WORKER: unknown setting \(did you mean DECICE_HOOKS_WORKERS\?\)$"):
        config.load([], {"DECICE_HOOKS_WORKER": "4"})
    with pytest.raises(ConfigError, match=r"^DECICE_HOOKS_ZZZ: unknown setting$"):
        config.load([], {"DECICE_HOOKS_ZZZ": "1"})
    assert config.load([], {"DECICE_OTHER": "x", "PATH": "/bin"}).workers == 2
