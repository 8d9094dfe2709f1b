"""``decice-hooks``: the hook service under gunicorn, with settings fit for production.

Settings come from flags or ``DECICE_HOOKS_*`` environment variables (flags
win; ``hooks.config`` has the table) and are validated before anything starts:
a bad value ends the process with status 2 and one line on stderr.  The work
is CPU-bound JSON, so the defaults are a few processes with a few threads
each.  ``--check-config`` prints the effective settings; ``--healthcheck``
asks the running server's ``/healthz`` (the image's HEALTHCHECK).

gunicorn settings chosen here, and why:

- ``hooks.worker.HookWorker`` (gthread, hardened): idle connections wait in
  the event loop, not in a thread; a request that takes longer than
  ``request_timeout`` to arrive and be answered is cut off; closing a
  connection never waits on the client — so slow clients cannot pin workers;
- request line and header sizes at gunicorn's defaults (4094 and 8190 bytes),
  at most 64 headers: a hook request has a handful (a service mesh adds some);
- keep-alive 30 s, so Metacontroller reuses connections between syncs;
- TLS when a certificate is configured; a client CA makes the TLS layer
  verify any client certificate offered, and the app then demands one on the
  hook paths (``hooks.auth.client_certificate``), leaving probes and metrics
  reachable by the kubelet and Prometheus;
- metrics: a fresh ``PROMETHEUS_MULTIPROC_DIR`` in the temporary directory
  before any worker starts, dead workers marked (``child_exit``), the
  directory removed on exit;
- no access log (each hook call is one structured line from the app), no
  control socket (nothing may be written outside the temporary directory);
- in each worker, the C allocator kept from hoarding memory (``tune_malloc``)
  and the garbage collector tuned for decoded JSON (``tune_gc``).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import shutil
import ssl
import sys
import tempfile
import urllib.request
from typing import Any, Sequence

from gunicorn.app.base import BaseApplication

from hooks import config, logs
from hooks.config import ConfigError, Settings

METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


class HookServer(BaseApplication):
    """gunicorn, configured from ``options`` only (it reads no config file or argv of its own)."""

    def __init__(self, settings: Settings, options: dict[str, Any]):
        self.settings = settings
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from hooks.app import create_app

        return create_app(settings=self.settings)


def _child_exit(_arbiter: Any, worker: Any) -> None:
    from hooks.metrics import mark_process_dead

    mark_process_dead(worker.pid)


GC_THRESHOLD = (50_000, 20, 20)


def tune_gc() -> None:
    """Make cyclic garbage collection rare, and blind to what the worker holds for good.

    Decoding a hook request creates one tracked object per JSON object and array — a quarter
    million for a 1,000-pod job — and reference counting frees them all once the answer is
    sent: they form no cycles.  With CPython's default threshold (700 allocations) the
    collector runs hundreds of times per large request, each time walking young objects and,
    every so often, everything alive.  Freezing moves the objects loaded at start-up (Flask,
    marshmallow, the app) out of its sight; the higher threshold still collects real cycles,
    just less often.  The benchmark (benchmarks/README.md) shows the effect; memory stays flat."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -2, -3, -8
MALLOC_ARENAS = 2
MMAP_THRESHOLD = 1024 * 1024
TRIM_THRESHOLD = 64 * 1024 * 1024
TOP_PAD = 16 * 1024 * 1024


def tune_malloc() -> None:
    """Keep the C allocator from hoarding memory across requests (glibc only; a no-op elsewhere).

    Every request thread would otherwise get a malloc arena of its own, and glibc raises its
    mmap threshold after each large free, so the multi-megabyte buffers of large syncs end up
    scattered over arenas that are never given back: RSS creeps up with the mix of request
    sizes.  Two arenas and a fixed threshold (large buffers mapped, and unmapped when freed)
    keep a worker's memory flat (the same as MALLOC_ARENA_MAX=2 and MALLOC_MMAP_THRESHOLD_).
    A fixed threshold also fixes the trim threshold at its 128 KiB default, which would give
    the heap back after every request and fault it in again on the next: up to 64 MiB of
    freed heap is kept instead, and the heap grows 16 MiB at a time (benchmarks/README.md)."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_ARENA_MAX, MALLOC_ARENAS)
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    mallopt(M_TOP_PAD, TOP_PAD)


def _worker_ready(worker: Any) -> None:
    tune_malloc()
    tune_gc()
    worker.log.info("Worker ready (pid: %s)", worker.pid)


def gunicorn_options(settings: Settings, metrics_dir: str | None = None) -> dict[str, Any]:
    """The gunicorn settings for ``settings`` (see the module docstring for the choices)."""
    options: dict[str, Any] = {
        "bind": [settings.bind],
        "workers": settings.workers,
        "threads": settings.threads,
        "worker_class": "hooks.worker.HookWorker",
        "timeout": settings.timeout,
        "graceful_timeout": 20,
        "keepalive": 30,
        "worker_connections": 256,
        "limit_request_line": 4094,
        "limit_request_fields": 64,
        "limit_request_field_size": 8190,
        "loglevel": settings.log_level,
        "logger_class": "hooks.logs.GunicornLogger",
        "errorlog": "-",
        "accesslog": None,
        "proc_name": "decice-hooks",
        "control_socket_disable": True,
        "post_worker_init": _worker_ready,
        "child_exit": _child_exit,
    }
    if metrics_dir is not None:
        options["on_exit"] = lambda _arbiter: shutil.rmtree(metrics_dir, ignore_errors=True)
    if settings.tls:
        options.update(certfile=settings.tls_cert_file, keyfile=settings.tls_key_file)
        if settings.tls_client_ca_file:
            options.update(ca_certs=settings.tls_client_ca_file, cert_reqs=ssl.CERT_OPTIONAL)
    return options


def healthcheck(settings: Settings, timeout: float = 4.0) -> int:
    """0 when the server at ``settings.bind`` answers ``/healthz`` with 200 (over loopback for a
    wildcard address; TLS without verifying the certificate: this checks liveness, not identity)."""
    if settings.bind.startswith("unix:"):
        print("decice-hooks: --healthcheck needs a TCP bind address", file=sys.stderr)
        return EXIT_FAILED
    host, _, port = settings.bind.rpartition(":")
    host = host.strip("[]")
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    scheme = "https" if settings.tls else "http"
    context = None
    if settings.tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    url = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return EXIT_OK if response.status == 200 else EXIT_FAILED
    except OSError as exc:
        print(f"decice-hooks: {url}: {exc}", file=sys.stderr)
        return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> None:
    parser = config.parser()
    parser.add_argument("--check-config", action="store_true",
                        help="Validate the settings, print them as JSON and exit.")
    parser.add_argument("--healthcheck", action="store_true",
                        help="Ask the running server's /healthz; exit 0 when healthy, 1 otherwise.")
    args = parser.parse_args(argv)
    try:
        settings = config.from_sources(vars(args), os.environ)
    except ConfigError as exc:
        print(f"decice-hooks: invalid setting: {exc}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    if args.healthcheck:
        sys.exit(healthcheck(settings))
    if args.check_config:
        print(json.dumps(settings.public(), indent=2))
        sys.exit(EXIT_OK)

    logs.configure(settings.log_level, settings.log_format)
    try:
        metrics_dir = tempfile.mkdtemp(prefix="decice-hooks-metrics-")
    except OSError as exc:
        print(f"decice-hooks: cannot create the metrics directory in {tempfile.gettempdir()}: {exc}", file=sys.stderr)
        sys.exit(EXIT_FAILED)
    # Before any worker imports prometheus_client: it picks multiprocess mode at import time.
    os.environ[METRICS_DIR_ENV] = metrics_dir
    try:
        HookServer(settings, gunicorn_options(settings, metrics_dir)).run()
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
