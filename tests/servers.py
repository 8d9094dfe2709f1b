"""Start the real ``decice-hooks`` (gunicorn) on a loopback port for a test, and stop it.

The server's output goes to a file, not a pipe: a pipe nobody reads would fill
up with log lines and block the server.  Everything is bounded in time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.driver import ROOT

START_TIMEOUT = 30
SCRIPT = Path(sys.executable).with_name("decice-hooks")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def command() -> list[str]:
    """The image's start command when installed; the same entry point through python otherwise."""
    if SCRIPT.is_file():
        return [str(SCRIPT)]
    return [sys.executable, "-c", "from hooks.server import main; main()"]


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This checkout's code first, no inherited hook settings, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECICE_HOOKS_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra or {})
    return env


@dataclass
class Server:
    url: str
    port: int
    proc: subprocess.Popen
    log_path: Path
    context: ssl.SSLContext | None = None

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_lines(self) -> list[dict]:
        """The JSON log lines written so far."""
        out = []
        for line in self.output().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                out.append(entry)
        return out

    def request(self, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(self.url + path, data=body, method="POST" if body is not None else "GET",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()


    def count(self, prefix: str) -> int:
        return sum(line.get("msg", "").startswith(prefix) for line in self.log_lines())

    def workers_ready(self) -> bool:
        """Every worker that booted has loaded the app (stopping gunicorn while a worker boots
        makes it wait its whole graceful timeout)."""
        booted = self.count("Booting worker")
        return booted > 0 and booted == self.count("Worker ready")

    def wait(self, condition, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"hook server: condition not met:\n{self.output()[-3000:]}")
            time.sleep(0.05)


def _wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            if server.workers_ready() and server.request("/healthz", timeout=1)[0] == 200:
                return
        except OSError:
            pass
        if server.proc.poll() is not None or time.monotonic() > deadline:
            stop(server.proc)
            pytest.fail(f"hook server did not start:\n{server.output()[-3000:]}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=25)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@contextmanager
def hook_server(log_dir: Path, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT,
                context: ssl.SSLContext | None = None, **popen: Any) -> Iterator[Server]:
    port = free_port()
    log_path = log_dir / f"server-{port}.log"
    scheme = "https" if context is not None else "http"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [*command(), "--bind", f"127.0.0.1:{port}", *args],
            cwd=cwd, env=environment(env), stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
            **popen,
        )
    server = Server(f"{scheme}://127.0.0.1:{port}", port, proc, log_path, context)
    try:
        _wait_healthy(server)
        yield server
    finally:
        stop(proc)
