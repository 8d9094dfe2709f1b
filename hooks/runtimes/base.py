"""What every runtime module exchanges with the sync loop.

A runtime module turns the model plus the observed children into task status
(``observe``) and, once the job-level decisions are made, into desired
children (``desired``).  It exposes:

- ``NAME``: the runtime's name in the spec;
- ``CHILD_KINDS``: the Metacontroller child keys (``<Kind>.<apiVersion>``) it
  reads and writes; a job using the runtime needs all of them managed;
- ``observe(job, tasks, children, now) -> Observation``;
- ``desired(job, tasks, children, observation, plan, now, policy, memo) -> list[dict]``;
  ``memo`` (``hooks.memo``) remembers what is expensive to build again, the kubernetes
  runtime's pods; the others ignore it.

Optionally:

- ``COMPONENT``: the manifests component that adds its child kinds to the
  CompositeController (absent: they are in ``manifests/base``);
- ``needed_kinds(tasks) -> tuple[str, ...]``: the child keys these tasks need,
  when not all of ``CHILD_KINDS``;
- ``STARTS_TOGETHER``: True when all its tasks become one object that orders
  their start itself (Volcano): they start together once their dependencies
  on other runtimes' tasks are met (``status.gate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

Children = Mapping[str, Mapping[str, dict]]
"""Observed children: child key (``Pod.v1``) → object name → object."""

TASK_PHASES = ("Waiting", "Pending", "Running", "Succeeded", "Failed")


@dataclass(frozen=True)
class TaskStatus:
    """One entry of ``status.tasks``.  ``started``: the runtime observed children for the task
    (a task that has not started waits for its dependencies); ``counts_failures``: its failures
    count against ``spec.backoffLimit`` (other runtimes enforce their own retry limit)."""

    name: str
    runtime: str
    phase: str
    replicas: int
    pending: int = 0
    running: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    disruptions: int = 0
    nodes: tuple[str, ...] = ()
    message: str = ""
    started: bool = True
    counts_failures: bool = True

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "runtime": self.runtime,
            "phase": self.phase,
            "replicas": self.replicas,
            "pending": self.pending,
            "running": self.running,
            "ready": self.ready,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "disruptions": self.disruptions,
            "nodes": list(self.nodes),
        }
        if self.message:
            out["message"] = self.message
        return out


@dataclass(frozen=True)
class Stuck:
    """A child that cannot make progress: a pod that cannot be scheduled, pull its image,
    or start its container.  ``since`` is when it got stuck, read from the child."""

    child: str
    task: str
    reason: str
    message: str
    since: datetime | None

    def describe(self) -> str:
        return f"{self.child}: {self.reason}: {self.message}" if self.message else f"{self.child}: {self.reason}"


@dataclass(frozen=True)
class Observation:
    """What a runtime saw.  ``failure`` is a terminal (reason, message) the runtime itself
    detected (e.g. a Volcano Job that failed); ``retry_at`` the earliest moment a delayed
    replacement becomes due; ``workloads`` how many children still run user code (finalize
    waits for zero)."""

    tasks: tuple[TaskStatus, ...]
    stuck: tuple[Stuck, ...] = ()
    failure: tuple[str, str] | None = None
    retry_at: datetime | None = None
    workloads: int = 0
    detail: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class Plan:
    """The job-level decision a runtime applies when computing desired children.

    ``start``: tasks that may get new children (dependencies met, job active);
    ``keep_active``: keep children still running or pending (False stops them);
    ``keep_finished``: keep terminated children (their logs) — False after the TTL.
    """

    start: frozenset[str]
    keep_active: bool
    keep_finished: bool
