"""Throw-away certificates for TLS tests, made with the ``openssl`` binary (tests skip without it).

A CA signs a server certificate for 127.0.0.1/localhost, a renewal of it,
and a client certificate; a second CA signs a client certificate the first does not trust.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="the openssl binary is not installed")
KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    renewed_cert: Path
    renewed_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path
    other_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2",
             "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)


def _leaf(directory: Path, name: str, ca: str, extensions: str) -> None:
    _openssl("req", *KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=directory)
    (directory / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=directory)


def make_certs(directory: Path) -> Certs:
    if OPENSSL is None:
        pytest.skip("the openssl binary is not installed")
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _leaf(directory, "server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _leaf(directory, "renewed", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _leaf(directory, "client", "ca", "extendedKeyUsage=clientAuth\n")
    _leaf(directory, "stranger", "other-ca", "extendedKeyUsage=clientAuth\n")
    return Certs(
        ca=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        renewed_cert=directory / "renewed.crt",
        renewed_key=directory / "renewed.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
        stranger_cert=directory / "stranger.crt",
        stranger_key=directory / "stranger.key",
        other_key=directory / "other-ca.key",
    )
