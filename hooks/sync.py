"""One reconcile: a Metacontroller hook request in, the desired children and status out.

``handle`` is the whole hook (``/sync`` and ``/finalize``); ``render`` is what
``decice render`` prints: the same ``reconcile`` with nothing observed.  Pure:
the only input besides the request is ``now``, and it never calls out (the hook
server's ``hooks.memo`` only saves building again what the same input built before).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

import orjson

from hooks import guard, names, status
from hooks.memo import NO_MEMO, Memo
from hooks.model import DeciceJob, InvalidSpec, Task, parse_job
from hooks.policy import DEFAULT_POLICY, Policy
from hooks.runtimes import RUNTIMES
from hooks.runtimes.base import Children, Observation, Plan
from hooks.runtimes.kubernetes import POD
from hooks.service import SERVICE, desired_service
from hooks.timeutil import seconds_until
from hooks.volumes import PVC, desired_claims, volume_status

LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
WORKLOAD_KINDS = frozenset(kind for module in RUNTIMES.values() for kind in module.CHILD_KINDS)
STOPPED = Plan(start=frozenset(), keep_active=False, keep_finished=False)
BASE_KINDS = frozenset({POD, SERVICE, PVC})
"""Child kinds ``manifests/base`` lists; runtime components add the others."""
MANAGED_KINDS = BASE_KINDS | WORKLOAD_KINDS
"""Every kind of child the hooks create."""


class BadRequest(ValueError):
    """The request is not a Metacontroller hook request (answered with 400)."""


@dataclass(frozen=True)
class HookRequest:
    parent: dict
    children: Children
    finalizing: bool = False
    source: bytes | None = None
    """The raw request, when ``children`` may hold Pods cut down by ``hooks.wire.decode``."""

    def observed_in_full(self) -> Children:
        """The children exactly as observed (decoding the raw request again, if there is one)."""
        if self.source is None:
            return self.children
        return parse_request(orjson.loads(self.source), self.finalizing).children


def parse_request(body: Any, finalizing: bool, source: bytes | None = None) -> HookRequest:
    """Check the request's shape; children keep only objects in the parent's namespace,
    keyed by name whatever the hook version (v1 keys ``name``, v2 ``namespace/name``)."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    parent = body.get("parent")
    if not isinstance(parent, dict) or not isinstance(parent.get("metadata"), dict):
        raise BadRequest("parent must be an object with metadata")
    if parent.get("kind", names.KIND) != names.KIND:
        raise BadRequest(f"parent kind must be {names.KIND}, got {parent.get('kind')!r}")
    namespace = parent["metadata"].get("namespace", "default")
    raw = body.get("children", {})
    if not isinstance(raw, dict):
        raise BadRequest("children must be an object keyed by <Kind>.<apiVersion>")
    children: dict[str, dict[str, dict]] = {}
    for key, group in raw.items():
        if group is None:
            group = {}
        if not isinstance(group, dict):
            raise BadRequest(f"children[{key!r}] must be an object")
        objects: dict[str, dict] = {}
        for obj_key, obj in group.items():
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                raise BadRequest(f"children[{key!r}][{obj_key!r}] must be an object with metadata.name")
            if meta.get("namespace", namespace) == namespace:
                objects[meta["name"]] = obj
        children[key] = objects
    final = body.get("finalizing", finalizing)
    if not isinstance(final, bool):
        raise BadRequest("finalizing must be a boolean")
    return HookRequest(parent=parent, children=children, finalizing=finalizing or final, source=source)


def _previous_status(parent: Mapping[str, Any]) -> dict:
    previous = parent.get("status")
    return previous if isinstance(previous, dict) else {}


def _as_child(key: str, obj: dict) -> dict:
    """An observed child as we last applied it (Metacontroller keeps that in an annotation),
    or, failing that, its identity, labels and spec."""
    annotations = obj["metadata"].get("annotations")
    last = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    if isinstance(last, str):
        try:
            applied = json.loads(last)
        except ValueError:
            applied = None
        if isinstance(applied, dict) and isinstance(applied.get("metadata"), dict):
            return applied
    kind, _, api_version = key.partition(".")
    meta = obj["metadata"]
    child: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", api_version),
        "kind": obj.get("kind", kind),
        "metadata": {k: meta[k] for k in ("name", "namespace", "labels") if k in meta},
    }
    if "spec" in obj:
        child["spec"] = obj["spec"]
    return child


def kept_children(children: Children, kinds: frozenset[str] | None = None) -> list[dict]:
    """Every observed child (of ``kinds``, if given), unchanged: for a job the hook will not act on."""
    return [
        _as_child(key, children[key][name])
        for key in sorted(children)
        if kinds is None or key in kinds
        for name in sorted(children[key])
    ]


def refuse(request: HookRequest, reason: str, message: str, generation: int | None, now: datetime) -> dict:
    """Act on nothing: keep every observed child (while finalizing, all but workloads) and say why."""
    observed = request.observed_in_full()
    kinds = frozenset(observed) - WORKLOAD_KINDS if request.finalizing else None
    response = {
        "status": status.refused(_previous_status(request.parent), generation, reason, message, now),
        "children": kept_children(observed, kinds),
    }
    if request.finalizing:
        response["finalized"] = not any(observed.get(k) for k in WORKLOAD_KINDS)
    return response


def _groups(job: DeciceJob) -> dict[str, tuple[Task, ...]]:
    groups: dict[str, list[Task]] = {}
    for task in job.spec.tasks:
        groups.setdefault(task.runtime, []).append(task)
    return {runtime: tuple(tasks) for runtime, tasks in groups.items()}


def _needed_kinds(runtime: str, tasks: tuple[Task, ...]) -> tuple[str, ...]:
    module = RUNTIMES[runtime]
    needed = getattr(module, "needed_kinds", None)
    return needed(tasks) if needed is not None else module.CHILD_KINDS


def _unavailable(job: DeciceJob, groups: Mapping[str, tuple[Task, ...]], managed: frozenset[str] | None) -> str | None:
    """Why this job cannot be run by this installation, if it cannot: the child kinds it needs
    that the CompositeController does not manage, and the manifests that add them."""
    missing_runtimes = sorted(r for r in groups if r not in RUNTIMES)
    if missing_runtimes:
        return f"runtime {', '.join(missing_runtimes)} is not supported by this version of the hooks"
    if managed is None:
        return None
    runtime_kinds = {kind: runtime for runtime, tasks in groups.items() for kind in _needed_kinds(runtime, tasks)}
    base = {kind for kind in runtime_kinds if kind in BASE_KINDS}
    if "kubernetes" in groups:
        base.add(SERVICE)
    if any(not v.existing_claim for v in job.spec.volumes):
        base.add(PVC)
    missing_base = sorted(kind for kind in base if kind not in managed)
    problems = [f"{', '.join(missing_base)}: install manifests/base"] if missing_base else []
    for runtime in sorted(groups):
        kinds = sorted(k for k, r in runtime_kinds.items() if r == runtime and k not in BASE_KINDS and k not in managed)
        if kinds:
            component = getattr(RUNTIMES[runtime], "COMPONENT", f"manifests/components/{runtime}")
            problems.append(f"{', '.join(kinds)} (runtime {runtime}): install the component {component}")
    if problems:
        return "the CompositeController does not manage " + "; ".join(problems)
    return None


def reconcile(
    job: DeciceJob, request: HookRequest, now: datetime, managed: frozenset[str] | None, policy: Policy = DEFAULT_POLICY,
    memo: Memo = NO_MEMO,
) -> dict:
    """Observe every runtime, decide the job's phase, then build the desired children and status."""
    previous = _previous_status(request.parent)
    groups = _groups(job)
    if reason := _unavailable(job, groups, managed):
        return refuse(request, "RuntimeUnavailable", reason, job.generation, now)
    children = request.children
    observations: dict[str, Observation] = {
        runtime: RUNTIMES[runtime].observe(job, tasks, children, now) for runtime, tasks in groups.items()
    }
    together = frozenset(r for r in groups if getattr(RUNTIMES[r], "STARTS_TOGETHER", False))
    tasks, startable = status.gate(job, (t for obs in observations.values() for t in obs.tasks), together)
    decision = status.decide(job, tasks, startable, tuple(observations.values()), previous, now)
    plan = STOPPED if request.finalizing else decision.plan

    desired: list[dict] = []
    if "kubernetes" in groups:
        desired.append(desired_service(job, groups["kubernetes"]))
    desired += desired_claims(job)
    for runtime, runtime_tasks in groups.items():
        desired += RUNTIMES[runtime].desired(job, runtime_tasks, children, observations[runtime], plan, now, policy, memo)
    guard.enforce(job, desired, managed, policy)

    response: dict[str, Any] = {
        "status": status.render(job, decision, tasks, volume_status(job, children), previous, now),
        "children": desired,
    }
    if request.finalizing:
        response["finalized"] = sum(obs.workloads for obs in observations.values()) == 0
    elif decision.wake_at is not None and decision.wake_at > now:
        response["resyncAfterSeconds"] = max(1, math.ceil(seconds_until(decision.wake_at, now)))
    return response


def handle(
    body: Any, now: datetime, finalizing: bool = False, policy: Policy = DEFAULT_POLICY, memo: Memo = NO_MEMO,
    source: bytes | None = None,
) -> dict:
    """The hook: a decoded request body → the response body.  Raises BadRequest for a body
    that is not a hook request; an invalid DeciceJob is answered, not raised.  ``memo`` is
    what the hook server remembers between requests (``hooks.memo``); ``source`` is the raw
    request when ``body`` comes from ``hooks.wire.decode``."""
    request = parse_request(body, finalizing, source)
    try:
        job = memo.parse(request.parent)
    except InvalidSpec as exc:
        generation = request.parent["metadata"].get("generation")
        generation = generation if isinstance(generation, int) and not isinstance(generation, bool) else None
        return refuse(request, "InvalidSpec", "; ".join(exc.errors), generation, now)
    try:
        return reconcile(job, request, now, frozenset(request.children), policy, memo)
    except guard.PolicyViolation as exc:
        return refuse(request, guard.REASON, "; ".join(exc.errors), job.generation, now)


def render(obj: Any, now: datetime, policy: Policy = DEFAULT_POLICY) -> list[dict]:
    """The children the hooks would create first for the DeciceJob ``obj`` (nothing observed).
    Raises InvalidSpec for an invalid job (PolicyViolation, a subclass, for a forbidden one)."""
    job = parse_job(obj)
    if reason := _unavailable(job, _groups(job), None):
        raise InvalidSpec([reason])
    return reconcile(job, HookRequest(parent=dict(obj), children={}), now, None, policy)["children"]
