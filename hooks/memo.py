"""What one hook server remembers between requests: results of pure functions, never observed state.

Metacontroller calls the sync hook for every change of a job's children and on every resync,
and between two calls little changes: the spec mostly never, the pods wanted mostly not (a pod
turning Running changes its status, not the pod the hook asks for).  Two things are therefore
kept, each under a key that covers everything it was computed from, so an answer is the same
bytes with or without them:

- parsed DeciceJobs (``model.memoized_parser``: the parent's identity and spec as the key);
- each task's desired pods, with the parsed job, the task and the attempt numbers of its
  slots they were built for; a change of any of them builds the task's pods afresh.  At most
  ``pods`` pods (about 1.7 KB each) of at most ``tasks`` tasks are kept, the least recently
  used task's dropped first.

Remembered pods are shared by the answers that use them, so nothing may change a child after
``hooks.sync.reconcile`` returns it (the app only serialises answers).  ``NO_MEMO`` remembers
nothing: ``decice render`` and direct calls of ``hooks.sync.handle`` use it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from hooks.model import DeciceJob, Task, memoized_parser, parse_job

Attempts = tuple[tuple[int, ...], ...]
"""Per slot (replica index) of a task, the attempt numbers of the pods it should have."""


@dataclass(frozen=True)
class _TaskPods:
    job: DeciceJob
    task: Task
    node_expressions: tuple[dict, ...]
    attempts: Attempts
    pods: list[dict[str, Any]]


class Memo:
    """One server's memory: ``parse`` for parents, ``task_pods`` for desired pods; safe to share
    between the threads of a worker."""

    def __init__(self, jobs: int = 512, pods: int = 10_000, tasks: int = 1024) -> None:
        self.parse: Callable[[Any], DeciceJob] = memoized_parser(jobs) if jobs > 0 else parse_job
        self.max_pods = pods
        self.max_tasks = tasks
        self._tasks: OrderedDict[tuple[str, str, str], _TaskPods] = OrderedDict()
        self._pods = 0
        self._lock = threading.Lock()

    def task_pods(
        self, job: DeciceJob, task: Task, node_expressions: tuple[dict, ...], attempts: Attempts,
        build: Callable[[], list[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        """The pods ``build()`` makes for ``task`` of ``job`` with these attempts, remembered.
        The list returned may be shared: read it, never change it."""
        if self.max_pods <= 0:
            return build()
        key = (job.namespace, job.name, task.name)
        with self._lock:
            kept = self._tasks.get(key)
            if (kept is not None and kept.job is job and kept.attempts == attempts and kept.task == task
                    and kept.node_expressions == node_expressions):
                self._tasks.move_to_end(key)
                return kept.pods
        pods = build()
        with self._lock:
            if (old := self._tasks.pop(key, None)) is not None:
                self._pods -= len(old.pods)
            if len(pods) <= self.max_pods:
                self._tasks[key] = _TaskPods(job, task, node_expressions, attempts, pods)
                self._pods += len(pods)
                while self._pods > self.max_pods or len(self._tasks) > self.max_tasks:
                    _, dropped = self._tasks.popitem(last=False)
                    self._pods -= len(dropped.pods)
        return pods


NO_MEMO = Memo(jobs=0, pods=0)
