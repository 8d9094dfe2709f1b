"""The last check before children leave the hook: what the operator's policy allows.

Whatever a runtime builds, ``enforce`` refuses children outside the parent's
namespace, of kinds the CompositeController does not manage, and pods (bare,
or templates inside Volcano Jobs, EdgeApplications, Sedna resources) that are
privileged, add capabilities, share host namespaces or ports, mount hostPath
volumes, or run as a service account other than the namespace default — unless
the policy allows it.  ``hooks.sync`` turns the refusal into the
``PolicyViolation`` condition, keeping every observed child.

Bare Pods, which may number thousands, are checked field by field; other
kinds are few, so they are searched for pod specs wherever they nest them.
"""

from __future__ import annotations

from typing import Any, Iterator

from hooks.model import DeciceJob, InvalidSpec
from hooks.policy import Policy

REASON = "PolicyViolation"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
MAX_REPORTED = 5


class PolicyViolation(InvalidSpec):
    """Desired children the policy forbids; ``errors`` says which and why, one line each."""


def _pod_specs(obj: Any, path: str) -> Iterator[tuple[str, dict]]:
    """Every (path, pod spec) nested in ``obj``: a dict with a list of containers."""
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield path, obj
        for key, value in obj.items():
            if isinstance(value, (dict, list)):
                yield from _pod_specs(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            if isinstance(value, (dict, list)):
                yield from _pod_specs(value, f"{path}[{index}]")


def pod_spec_problems(spec: dict, namespace: str, policy: Policy) -> list[str]:
    """What in one pod spec the policy forbids."""
    problems: list[str] = []
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account and not policy.allows_service_account(namespace, account):
        problems.append(f"service account {account!r} is not allowed")
    if policy.allow_privileged:
        return problems
    problems += [f"{field} is set" for field in HOST_NAMESPACES if spec.get(field)]
    for volume in spec.get("volumes") or ():
        if isinstance(volume, dict) and "hostPath" in volume:
            problems.append(f"volume {volume.get('name')!r} is a hostPath volume")
    for field in CONTAINER_LISTS:
        for container in spec.get(field) or ():
            problems += _container_problems(container)
    return problems


def _container_problems(container: Any) -> list[str]:
    if not isinstance(container, dict):
        return []
    name = container.get("name")
    problems = []
    context = container.get("securityContext")
    if isinstance(context, dict):
        if context.get("privileged"):
            problems.append(f"container {name!r} is privileged")
        capabilities = context.get("capabilities")
        if isinstance(capabilities, dict) and capabilities.get("add"):
            problems.append(f"container {name!r} adds capabilities {capabilities['add']}")
        windows = context.get("windowsOptions")
        if isinstance(windows, dict) and windows.get("hostProcess"):
            problems.append(f"container {name!r} is a Windows host process")
    for port in container.get("ports") or ():
        if isinstance(port, dict) and port.get("hostPort"):
            problems.append(f"container {name!r} uses host port {port['hostPort']}")
    return problems


def child_problems(job: DeciceJob, child: dict, policy: Policy) -> list[str]:
    """Namespace and pod specs of one child (its kind is checked once per kind by ``enforce``)."""
    meta = child.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    problems = []
    if meta.get("namespace") != job.namespace:
        problems.append(f"namespace {meta.get('namespace')!r} is not the job's namespace {job.namespace!r}")
    if child.get("kind") == "Pod" and child.get("apiVersion") == "v1":
        spec = child.get("spec")
        problems += pod_spec_problems(spec if isinstance(spec, dict) else {}, job.namespace, policy)
    else:
        for path, spec in _pod_specs(child.get("spec"), "spec"):
            problems += [f"{p} ({path})" for p in pod_spec_problems(spec, job.namespace, policy)]
    return [f"{child.get('kind')} {meta.get('name')}: {p}" for p in problems] if problems else problems


def enforce(job: DeciceJob, children: list[dict], managed: frozenset[str] | None, policy: Policy) -> None:
    """Raise PolicyViolation listing (the first few) forbidden children; ``managed`` None: any kind."""
    problems: list[str] = []
    kinds: set[tuple[Any, Any]] = set()
    for child in children:
        kind = (child.get("kind"), child.get("apiVersion"))
        if kind not in kinds:
            kinds.add(kind)
            if managed is not None and f"{kind[0]}.{kind[1]}" not in managed:
                problems.append(f"kind {kind[0]}.{kind[1]} is not managed by the CompositeController")
        problems += child_problems(job, child, policy)
    if problems:
        shown = problems[:MAX_REPORTED]
        if len(problems) > MAX_REPORTED:
            shown.append(f"and {len(problems) - MAX_REPORTED} more")
        raise PolicyViolation(shown)
