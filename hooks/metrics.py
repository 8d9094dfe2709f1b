"""Prometheus metrics of the hook service, served at ``GET /metrics``.

Under ``decice-hooks`` several gunicorn workers share one ``/metrics``: the
launcher points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before any
worker starts, every worker writes its values there (the client library's
multiprocess mode) and ``exposition`` merges them, whichever worker serves the
scrape.  Without that variable (tests, a single process) the app's own
registry is served.  Every label takes values from a small fixed set.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from hooks.calls import NOT_MODIFIED, OK, Call

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The metric families, in a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "decice_hooks_requests", "Hook calls by hook and outcome (ok, not_modified, refused, rejected, error).",
            ["hook", "outcome"], registry=self.registry)
        self.latency = Histogram(
            "decice_hooks_request_duration_seconds", "Time from request to answer of hook calls.",
            ["hook"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.errors = Counter(
            "decice_hooks_errors", "Hook calls not answered normally, by reason (e.g. InvalidSpec, "
            "PolicyViolation, MalformedJSON, Unauthorized, RequestEntityTooLarge, InternalError).",
            ["hook", "reason"], registry=self.registry)
        self.phases = Counter(
            "decice_hooks_job_phase", "Sync answers by the job phase they report.",
            ["phase"], registry=self.registry)
        self.transitions = Counter(
            "decice_hooks_job_transitions", "Sync answers that move a job into a new phase, by that phase.",
            ["phase"], registry=self.registry)

    def record(self, call: Call) -> None:
        self.requests.labels(call.hook, call.outcome).inc()
        self.latency.labels(call.hook).observe(call.duration)
        if call.outcome not in (OK, NOT_MODIFIED):
            self.errors.labels(call.hook, call.reason or call.outcome).inc()
        if call.phase is not None and call.hook == "sync":
            self.phases.labels(call.phase).inc()
            if call.parent is None or call.parent.phase != call.phase:
                self.transitions.labels(call.phase).inc()

    def exposition(self) -> bytes:
        """The text format: every worker's values when in multiprocess mode, else ours."""
        directory = os.environ.get(MULTIPROC_ENV)
        if not directory:
            return generate_latest(self.registry)
        from prometheus_client import multiprocess

        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=directory)
        return generate_latest(merged)


def mark_process_dead(pid: int) -> None:
    """gunicorn's ``child_exit``: drop a dead worker's live-gauge files (its counters stay)."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, directory)
