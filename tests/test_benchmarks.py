"""The benchmark keeps working (tiny sizes; no timing is asserted), and the worker tuning it
measures does what it says."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.driver import ROOT


def test_benchmark_smoke_run(tmp_path):
    out = tmp_path / "results.json"
    result = subprocess.run([sys.executable, "benchmarks/bench.py", "--quick", "--json", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    results = json.loads(out.read_text())
    assert [row["replicas"] for row in results["sizes"]] == [5, 20]
    assert all(row["response_bytes"] > 0 and row["ratio"] > 0 for row in results["sizes"])
    assert results["throughput"]["errors"] == 0 and results["throughput"]["requests_per_second"] > 0
    assert results["memory"]["rss_before_kib"], "worker RSS was read"
    assert results["render"]["seconds"] > 0
    assert "| replicas |" in result.stdout


def test_worker_tuning():
    code = ("import gc; from hooks.server import tune_gc, tune_malloc, GC_THRESHOLD\n"
            "tune_malloc(); tune_gc()\n"
            "print(gc.get_threshold() == GC_THRESHOLD, gc.get_freeze_count() > 0)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["True", "True"], result.stderr
