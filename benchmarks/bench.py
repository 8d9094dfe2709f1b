"""Benchmarks of the hook server against the quality bars of SPEC section 6.

    python benchmarks/bench.py                 # full run, prints a Markdown report
    python benchmarks/bench.py --quick         # tiny sizes, seconds (used by the test suite)
    python benchmarks/bench.py --json out.json # also write the raw figures

Measures, in one run, against ``decice-hooks`` (gunicorn) on 127.0.0.1:

1. ``POST /sync`` of a running job with N observed pods next to the bare cost
   of the same bytes, ``orjson.loads(request)`` + ``orjson.dumps(response)`` in
   this process, the two taking turns (medians of hundreds of samples); their ratio.
2. Small-sync throughput from many concurrent clients (``wrk`` when
   installed, else a Python load generator, reported as such).
3. Resident memory of every worker before and after many syncs.
4. ``decice render`` wall time for a large job, start-up included.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.workload import job_manifest, sync_request  # noqa: E402
from hooks.server import tune_gc  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``decice-hooks`` on a loopback port, in its own process group."""

    def __init__(self, workers: int, threads: int):
        self.port = free_port()
        env = dict(os.environ, DECICE_HOOKS_WORKERS=str(workers), DECICE_HOOKS_THREADS=str(threads))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from hooks.server import main; main()", "--bind", f"127.0.0.1:{self.port}"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                status, _ = self.request("GET", "/healthz", b"")
                if status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("hook server did not start")
            time.sleep(0.1)

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def request(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        conn = self.connection()
        try:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def worker_pids(self) -> list[int]:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return sorted(int(pid) for pid in children.read_text().split()) if children.exists() else []

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)


def rss_kib(pid: int) -> int:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) if match else 0


def median_time(action: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@contextlib.contextmanager
def server_gc() -> Iterator[None]:
    """This process's garbage collector tuned as the hook server tunes its own (``tune_gc``)."""
    thresholds = gc.get_threshold()
    tune_gc()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def side_by_side(actions: dict[str, Callable[[], Any]], repeats: int, min_seconds: float,
                 turn_seconds: float = 0.25) -> dict[str, float]:
    """The median time of each action, sampled in turns of about ``turn_seconds`` each until
    every one has ``repeats`` samples and ``min_seconds`` have passed.  Taking turns makes
    the actions share the machine's state: a VM's speed drifts by several per cent within
    minutes, and a ratio of two medians taken minutes apart drifts with it."""
    samples: dict[str, list[float]] = {name: [] for name in actions}
    deadline = time.perf_counter() + min_seconds
    while time.perf_counter() < deadline or any(len(s) < repeats for s in samples.values()):
        for name, action in actions.items():
            turn_ends = time.perf_counter() + turn_seconds
            while True:
                start = time.perf_counter()
                action()
                end = time.perf_counter()
                samples[name].append(end - start)
                if end >= turn_ends:
                    break
    return {name: statistics.median(s) for name, s in samples.items()}


def bench_sizes(server: Server, sizes: list[int], repeats: int, min_seconds: float,
                turn_seconds: float = 0.25) -> list[dict[str, Any]]:
    """Per size: ``POST /sync`` over HTTP, and the bare cost of the same bytes —
    ``orjson.loads(request)`` + ``orjson.dumps(response)`` in this process, with Python's default
    garbage collector (the bar's definition) and with the collector tuned as the server's."""
    rows = []
    for replicas in sizes:
        body = orjson.dumps(sync_request(replicas))
        conn = server.connection()

        def post() -> bytes:
            conn.request("POST", "/sync", body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            if response.status != 200:
                raise RuntimeError(f"/sync answered {response.status}: {data[:300]!r}")
            return data

        answer = post()
        response = orjson.loads(answer)
        if len(response["children"]) < replicas:
            raise RuntimeError("the hook did not return every pod")

        def bare() -> None:
            orjson.loads(body)
            orjson.dumps(response)

        times = side_by_side({"sync": post, "bare": bare}, repeats, min_seconds, turn_seconds)
        with server_gc():
            times.update(side_by_side({"tuned": bare}, repeats, min_seconds / 2, turn_seconds))
        conn.close()
        rows.append({
            "replicas": replicas, "request_bytes": len(body), "response_bytes": len(answer),
            "sync_ms": times["sync"] * 1000, "bare_ms": times["bare"] * 1000, "ratio": times["sync"] / times["bare"],
            "bare_tuned_ms": times["tuned"] * 1000, "ratio_tuned": times["sync"] / times["tuned"],
            "us_per_replica": times["sync"] * 1e6 / replicas,
        })
    return rows


WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open(os.getenv("BENCH_BODY"), "rb")
wrk.body = f:read("*all")
f:close()
"""


def small_body() -> bytes:
    return orjson.dumps(sync_request(3))


def throughput_wrk(server: Server, concurrency: int, seconds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        body, script = Path(tmp, "body.json"), Path(tmp, "post.lua")
        body.write_bytes(small_body())
        script.write_text(WRK_SCRIPT)
        out = subprocess.run(
            ["wrk", "-t2", f"-c{concurrency}", f"-d{seconds}s", "--latency", "-s", str(script),
             f"http://127.0.0.1:{server.port}/sync"],
            env=dict(os.environ, BENCH_BODY=str(body)), capture_output=True, text=True, timeout=seconds + 60,
        ).stdout

    def latency(label: str) -> float:
        match = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        value, unit = float(match.group(1)), match.group(2)
        return value * {"us": 0.001, "ms": 1, "s": 1000}[unit]

    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "tool": "wrk", "concurrency": concurrency, "seconds": seconds,
        "requests_per_second": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "errors": (int(errors.group(1)) if errors else 0) + (sum(map(int, socket_errors.groups())) if socket_errors else 0),
        "p50_ms": latency("50%"), "p99_ms": latency("99%"),
    }


def throughput_python(server: Server, concurrency: int, seconds: float) -> dict[str, Any]:
    """Fallback load generator (threads with keep-alive connections); slower than wrk."""
    body = small_body()
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def client() -> None:
        conn = server.connection()
        mine: list[float] = []
        while time.monotonic() < stop_at:
            start = time.perf_counter()
            try:
                conn.request("POST", "/sync", body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except OSError:
                ok = False
                conn.close()
                conn = server.connection()
            mine.append(time.perf_counter() - start)
            if not ok:
                with lock:
                    errors[0] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {
        "tool": "python", "concurrency": concurrency, "seconds": seconds,
        "requests_per_second": len(latencies) / seconds, "errors": errors[0],
        "p50_ms": latencies[len(latencies) // 2] * 1000 if latencies else 0.0,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else 0.0,
    }


def memory(server: Server, syncs: int, connections: int = 8, warmup: int = 10_000) -> dict[str, Any]:
    """RSS of every worker after a warm-up and after ``syncs`` more, the same mix both times:
    small syncs with a 1,000-replica one every 100th, over several connections so that every
    worker gets its share.  The warm-up lets each worker's heap reach its working size: a
    worker serving this mix grows by about 5 % over its first 7,500 syncs, then stays."""
    small = small_body()
    large = orjson.dumps(sync_request(1000))
    conns = [server.connection() for _ in range(connections)]

    def post(i: int) -> None:
        is_large = i % 100 == 0
        conn = conns[(i // 100 if is_large else i) % connections]  # large ones in turn on every connection
        conn.request("POST", "/sync", body=large if is_large else small,
                     headers={"Content-Type": "application/json"})
        conn.getresponse().read()

    for i in range(warmup):
        post(i)
    before = {pid: rss_kib(pid) for pid in server.worker_pids()}
    for i in range(syncs):
        post(i)
    for conn in conns:
        conn.close()
    after = {pid: rss_kib(pid) for pid in server.worker_pids()}
    growth = max((after[p] - before[p]) / before[p] for p in before if p in after) if before else 0.0
    return {"syncs": syncs, "rss_before_kib": before, "rss_after_kib": after, "max_growth": growth}


def render_time(replicas: int, repeats: int) -> dict[str, Any]:
    decice = shutil.which("decice") or ""
    command = [decice] if decice else [sys.executable, "-m", "glue.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "job.yaml")
        path.write_text(yaml.safe_dump(job_manifest(replicas)))

        def run() -> None:
            subprocess.run([*command, "render", str(path), "-o", "json"], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL, timeout=120)

        return {"replicas": replicas, "command": " ".join(Path(c).name for c in command),
                "seconds": median_time(run, repeats)}


def report(results: dict[str, Any]) -> str:
    lines = [f"Machine: {results['machine']}", "",
             "| replicas | request | response | POST /sync (median) | orjson loads+dumps | ratio "
             "| loads+dumps, tuned GC | ratio, tuned GC | µs/replica |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in results["sizes"]:
        lines.append(f"| {row['replicas']:,} | {row['request_bytes'] / 1e6:.2f} MB | {row['response_bytes'] / 1e6:.2f} MB "
                     f"| {row['sync_ms']:.1f} ms | {row['bare_ms']:.1f} ms | {row['ratio']:.2f} "
                     f"| {row['bare_tuned_ms']:.1f} ms | {row['ratio_tuned']:.2f} | {row['us_per_replica']:.1f} |")
    t = results["throughput"]
    lines += ["", f"Small syncs ({t['tool']}, {t['concurrency']} connections, {t['seconds']} s): "
              f"{t['requests_per_second']:.0f} req/s, {t['errors']} errors, p50 {t['p50_ms']:.1f} ms, p99 {t['p99_ms']:.1f} ms"]
    m = results["memory"]
    lines.append(f"Worker RSS over {m['syncs']:,} syncs: "
                 + ", ".join(f"{m['rss_before_kib'][p] / 1024:.1f} → {m['rss_after_kib'].get(p, 0) / 1024:.1f} MiB"
                             for p in m["rss_before_kib"])
                 + f" (max growth {m['max_growth'] * 100:.1f} %)")
    r = results["render"]
    lines.append(f"`{r['command']} render` of {r['replicas']:,} replicas: {r['seconds'] * 1000:.0f} ms wall")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeats", type=int, default=15, help="at least this many samples per size and measure")
    parser.add_argument("--min-seconds", type=float, default=6.0, help="and at least this long per size, in turns")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("DECICE_HOOKS_WORKERS", "2")))
    parser.add_argument("--threads", type=int, default=int(os.environ.get("DECICE_HOOKS_THREADS", "4")))
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--syncs", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=10_000, help="syncs before the first RSS reading")
    parser.add_argument("--render-replicas", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="tiny sizes and durations (a smoke run)")
    parser.add_argument("--json", help="also write the raw results to this file")
    args = parser.parse_args(argv)
    turn_seconds = 0.25
    if args.quick:
        args.sizes, args.repeats, args.seconds, args.syncs, args.render_replicas = "5,20", 3, 1, 200, 20
        args.min_seconds, turn_seconds = 0.0, 0.01
        args.warmup = 100
        args.concurrency = min(args.concurrency, 8)
    sizes = [int(s) for s in args.sizes.split(",")]

    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
                   f"{args.workers} workers × {args.threads} threads",
    }
    server = Server(args.workers, args.threads)
    try:
        results["sizes"] = bench_sizes(server, sizes, args.repeats, args.min_seconds, turn_seconds)
        if shutil.which("wrk") and not args.quick:
            results["throughput"] = throughput_wrk(server, args.concurrency, args.seconds)
        else:
            results["throughput"] = throughput_python(server, args.concurrency, args.seconds)
        results["memory"] = memory(server, args.syncs, warmup=args.warmup)
    finally:
        server.stop()
    results["render"] = render_time(args.render_replicas, 3 if args.quick else 7)
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
