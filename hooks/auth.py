"""Who may call the hooks: a bearer token from a file, and optionally a client certificate.

Metacontroller's ``webhook.authorization`` sends ``Authorization: Bearer <token>``
read from a Secret; the hook Deployment mounts the same Secret as a file.  The
file holds one accepted token per line (so a rotation can accept the old and
the new token for a while) and is re-read whenever its identity, size or
modification time changes — one ``stat`` per request — so rotating the Secret
needs no restart.  Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import os
import threading
from dataclasses import dataclass
from typing import Any

SCHEME = "bearer"
MAX_TOKEN_FILE_BYTES = 64 * 1024


class TokenError(Exception):
    """The token file cannot be used (missing, unreadable, empty, too large)."""


def read_tokens(path: str) -> tuple[bytes, ...]:
    """The accepted tokens: every non-blank line, surrounding white space removed."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise TokenError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise TokenError(f"{path} is larger than {MAX_TOKEN_FILE_BYTES} bytes")
    tokens = tuple(line.strip() for line in data.splitlines() if line.strip())
    if not tokens:
        raise TokenError(f"{path} holds no token")
    return tokens


@dataclass(frozen=True)
class _Loaded:
    stamp: tuple[int, int, int]
    tokens: tuple[bytes, ...]


class TokenFile:
    """The tokens of ``path`` as of its last change.  The only state is the last reading,
    replaced whole (one attribute assignment), so concurrent threads at worst read twice."""

    def __init__(self, path: str):
        self.path = path
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    def tokens(self) -> tuple[bytes, ...]:
        """Raises TokenError while the file is unusable: callers fail closed."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise TokenError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        loaded = self._loaded
        if loaded is None or loaded.stamp != stamp:
            with self._lock:
                loaded = _Loaded(stamp, read_tokens(self.path))
                self._loaded = loaded
        return loaded.tokens


def bearer_token(header: str | None) -> bytes | None:
    """The credential of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    if not header:
        return None
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != SCHEME or not credential:
        return None
    return credential.encode("utf-8", "surrogateescape")


def token_accepted(presented: bytes | None, accepted: tuple[bytes, ...]) -> bool:
    """Constant time in the token's content: every accepted token is compared."""
    if presented is None:
        return False
    matched = False
    for token in accepted:
        matched |= hmac.compare_digest(presented, token)
    return matched


def client_certificate(environ: dict[str, Any]) -> bool:
    """Whether the TLS peer presented a certificate our client CA verified.  gunicorn puts the
    connection's socket in the WSGI environ; the handshake already rejected untrusted ones."""
    sock = environ.get("gunicorn.socket")
    getpeercert = getattr(sock, "getpeercert", None)
    return bool(getpeercert and getpeercert())
