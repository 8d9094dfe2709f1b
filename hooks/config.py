"""Every setting of the hook service, from ``decice-hooks`` flags or ``DECICE_HOOKS_*`` variables.

``OPTIONS`` is the one table: each setting's field, environment variable, flag,
default (as a user would write it) and meaning; ``--help`` and
docs/operations.md show the same table.  ``load`` takes flags over environment
over defaults, validates every value — files included, so a missing Secret or
a certificate that does not match its key stops the start, not the first
request — and returns a frozen ``Settings``, or raises ``ConfigError`` with one
line naming the setting and what is wrong.
"""

from __future__ import annotations

import argparse
import difflib
import re
import ssl
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Sequence

from hooks.auth import TokenError, read_tokens
from hooks.policy import ANY, Policy

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("json", "text")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_SIZE = re.compile(r"^([0-9]+)(Ki|Mi|Gi|k|M|G)?$")
_SIZE_UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MIN_BODY_BYTES = 1024
ENV_PREFIX = "DECICE_HOOKS_"


class ConfigError(ValueError):
    """A setting has a bad value; the message is one line naming the setting."""


@dataclass(frozen=True)
class Settings:
    bind: str
    workers: int
    threads: int
    timeout: int
    request_timeout: int
    log_level: str
    log_format: str
    max_body_bytes: int
    etag: bool
    auth_token_file: str | None
    tls_cert_file: str | None
    tls_key_file: str | None
    tls_client_ca_file: str | None
    allow_privileged: bool
    allowed_service_accounts: frozenset[str]
    edge_tolerations: tuple[dict, ...]
    memo_pods: int

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    @property
    def policy(self) -> Policy:
        return Policy(
            edge_tolerations=self.edge_tolerations,
            allowed_service_accounts=self.allowed_service_accounts,
            allow_privileged=self.allow_privileged,
        )

    def public(self) -> dict[str, Any]:
        """The effective settings for display: file paths, never file contents."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            out[item.name] = sorted(value) if isinstance(value, frozenset) else list(value) if isinstance(value, tuple) else value
        return out


# --- value parsers: text → value, or ValueError saying what was expected -------------


def whole_number(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"must be a whole number, got {text!r}") from None
        if value < minimum:
            raise ValueError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_int = whole_number(1)


def bind_address(text: str) -> str:
    if text.startswith("unix:"):
        if len(text) == len("unix:"):
            raise ValueError("unix: needs a socket path")
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be HOST:PORT (e.g. 0.0.0.0:8080) or unix:PATH, got {text!r}")
    return text


def choice(*values: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.lower() not in values:
            raise ValueError(f"must be one of {', '.join(values)}, got {text!r}")
        return text.lower()

    return parse


def boolean(text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError(f"must be true or false, got {text!r}")


def byte_size(text: str) -> int:
    """Bytes, optionally with a suffix k, M, G (powers of 1000) or Ki, Mi, Gi (powers of 1024)."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(f"must be a size in bytes such as 1048576, 64Mi or 10M, got {text!r}")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2)]
    if value < MIN_BODY_BYTES:
        raise ValueError(f"must be at least {MIN_BODY_BYTES} bytes, got {text!r}")
    return value


def optional_path(text: str) -> str | None:
    return text or None


def service_accounts(text: str) -> frozenset[str]:
    """Comma-separated ``name``, ``namespace/name`` or ``*``."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    for entry in entries:
        namespace, _, name = entry.rpartition("/")
        valid = entry == ANY or (_DNS_SUBDOMAIN.match(name) and (not namespace or _DNS_LABEL.match(namespace)))
        if not valid:
            raise ValueError(f"{entry!r} is not a service account name, namespace/name or *")
    return frozenset(entries)


def tolerations(text: str) -> tuple[dict, ...]:
    """A JSON or YAML list of Kubernetes tolerations, checked like a task's tolerations."""
    import yaml
    from marshmallow import ValidationError

    from hooks.model import TolerationSchema

    if not text.strip():
        return ()
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"is not valid JSON or YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(value, list):
        raise ValueError("must be a list of tolerations, e.g. [{key: node-role.kubernetes.io/edge, operator: Exists}]")
    try:
        loaded = TolerationSchema(many=True).load(value)
    except ValidationError as exc:
        raise ValueError(f"invalid toleration: {exc.messages}") from None
    for index, item in enumerate(loaded):
        if item.get("operator") == "Exists" and "value" in item:
            raise ValueError(f"toleration {index}: operator Exists takes no value")
    return tuple(loaded)


# --- the table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    field: str
    env: str
    flag: str
    default: str
    metavar: str
    help: str
    parse: Callable[[str], Any]


OPTIONS: tuple[Option, ...] = (
    Option("bind", "DECICE_HOOKS_BIND", "--bind", "0.0.0.0:8080", "HOST:PORT",
           "Address to listen on: HOST:PORT or unix:PATH.", bind_address),
    Option("workers", "DECICE_HOOKS_WORKERS", "--workers", "2", "N",
           "Worker processes; the work is CPU-bound, so about one per core.", positive_int),
    Option("threads", "DECICE_HOOKS_THREADS", "--threads", "4", "N",
           "Threads per worker: requests one worker serves at once.", positive_int),
    Option("timeout", "DECICE_HOOKS_TIMEOUT", "--timeout", "30", "SECONDS",
           "A worker that shows no sign of life this long (seconds) is killed and replaced.", positive_int),
    Option("request_timeout", "DECICE_HOOKS_REQUEST_TIMEOUT", "--request-timeout", "15", "SECONDS",
           "Seconds a connection has, from the moment a thread takes its request up, to deliver it "
           "and take the answer; then it is closed, so a slow client cannot hold a thread longer.",
           positive_int),
    Option("log_level", "DECICE_HOOKS_LOG_LEVEL", "--log-level", "info", "LEVEL",
           f"Log level: {', '.join(LOG_LEVELS)}. Every hook call is logged at info (refusals and "
           "rejections at warning).", choice(*LOG_LEVELS)),
    Option("log_format", "DECICE_HOOKS_LOG_FORMAT", "--log-format", "json", "FORMAT",
           "Log line format: json (one object per line) or text.", choice(*LOG_FORMATS)),
    Option("max_body_bytes", "DECICE_HOOKS_MAX_BODY_SIZE", "--max-body-size", "64Mi", "SIZE",
           "Largest request body accepted (bytes, or with k/M/G/Ki/Mi/Gi); larger ones get 413 "
           "before they are read.", byte_size),
    Option("etag", "DECICE_HOOKS_ETAG", "--etag", "true", "BOOL",
           "Send an ETag with every hook answer and answer 304 to a matching If-None-Match.", boolean),
    Option("auth_token_file", "DECICE_HOOKS_AUTH_TOKEN_FILE", "--auth-token-file", "", "PATH",
           "File of accepted bearer tokens, one per line. When set, /sync and /finalize need "
           "'Authorization: Bearer <token>'. Re-read when it changes.", optional_path),
    Option("tls_cert_file", "DECICE_HOOKS_TLS_CERT_FILE", "--tls-cert-file", "", "PATH",
           "PEM certificate (chain): serve HTTPS. Needs --tls-key-file.", optional_path),
    Option("tls_key_file", "DECICE_HOOKS_TLS_KEY_FILE", "--tls-key-file", "", "PATH",
           "PEM private key of the certificate.", optional_path),
    Option("tls_client_ca_file", "DECICE_HOOKS_TLS_CLIENT_CA_FILE", "--tls-client-ca-file", "", "PATH",
           "PEM CA bundle: /sync and /finalize need a client certificate it signed (mTLS); "
           "probes and /metrics do not. Needs TLS.", optional_path),
    Option("allow_privileged", "DECICE_HOOKS_ALLOW_PRIVILEGED", "--allow-privileged", "false", "BOOL",
           "Allow children with privileged containers, added capabilities, host namespaces (network, "
           "PID, IPC), host ports, Windows host processes or hostPath volumes.", boolean),
    Option("allowed_service_accounts", "DECICE_HOOKS_ALLOWED_SERVICE_ACCOUNTS", "--allowed-service-accounts",
           "", "LIST",
           "Comma-separated service accounts tasks may use besides 'default': NAME (any namespace), "
           "NAMESPACE/NAME, or * (any).", service_accounts),
    Option("edge_tolerations", "DECICE_HOOKS_EDGE_TOLERATIONS", "--edge-tolerations", "", "YAML",
           "JSON or YAML list of tolerations added to pods on KubeEdge edge nodes.", tolerations),
    Option("memo_pods", "DECICE_HOOKS_MEMO_PODS", "--memo-pods", "10000", "N",
           "Desired pods each worker remembers between syncs instead of building them again "
           "(about 1.7 KB each; 0: none).", whole_number(0)),
)


def parser(prog: str = "decice-hooks") -> argparse.ArgumentParser:
    """Flags for every option; their defaults are None so the environment can fill in."""
    out = argparse.ArgumentParser(
        prog=prog,
        description="Serve the DeciceJob Metacontroller hooks (/sync, /finalize, /healthz, /readyz, /metrics) "
                    "under gunicorn. Every flag has an environment variable; flags win.",
    )
    for option in OPTIONS:
        default = option.default or "unset"
        out.add_argument(option.flag, dest=option.field, metavar=option.metavar, default=None,
                         help=f"{option.help} [env {option.env}; default {default}]".replace("%", "%%"))
    return out


def _check_files(settings: Settings) -> None:
    if settings.auth_token_file is not None:
        try:
            read_tokens(settings.auth_token_file)
        except TokenError as exc:
            raise ConfigError(f"auth token file: {exc}") from None
    if (settings.tls_cert_file is None) != (settings.tls_key_file is None):
        raise ConfigError("TLS needs both a certificate and a key (DECICE_HOOKS_TLS_CERT_FILE and DECICE_HOOKS_TLS_KEY_FILE)")
    if settings.tls_client_ca_file is not None and not settings.tls:
        raise ConfigError("DECICE_HOOKS_TLS_CLIENT_CA_FILE needs TLS (a certificate and a key)")
    if settings.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load TLS certificate {settings.tls_cert_file} with key "
                              f"{settings.tls_key_file}: {exc}") from None
        if settings.tls_client_ca_file is not None:
            try:
                context.load_verify_locations(cafile=settings.tls_client_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"cannot load TLS client CA {settings.tls_client_ca_file}: {exc}") from None


def _unknown_variables(env: Mapping[str, str]) -> None:
    """A misspelt variable would otherwise be ignored silently and its default used."""
    known = {option.env for option in OPTIONS}
    suffixes = [k.removeprefix(ENV_PREFIX) for k in sorted(known)]
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=1)
            hint = f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""
            raise ConfigError(f"{name}: unknown setting{hint}")


def from_sources(flags: Mapping[str, str | None], env: Mapping[str, str]) -> Settings:
    """Flags (by field name; None = not given) over environment over defaults, validated."""
    _unknown_variables(env)
    values: dict[str, Any] = {}
    for option in OPTIONS:
        if flags.get(option.field) is not None:
            text, source = flags[option.field], option.flag
        elif option.env in env:
            text, source = env[option.env], option.env
        else:
            text, source = option.default, f"default of {option.env}"
        try:
            values[option.field] = option.parse(text)
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    settings = Settings(**values)
    _check_files(settings)
    return settings


def load(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from command-line flags and an environment (tests pass both explicitly)."""
    import os

    args = parser().parse_args([] if argv is None else list(argv))
    return from_sources(vars(args), os.environ if env is None else env)
