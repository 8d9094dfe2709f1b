"""The job's headless Service: stable DNS names ``<task>-<i>.<job>`` for every pod."""

from __future__ import annotations

from typing import Any

from hooks import names
from hooks.model import DeciceJob, Task

SERVICE = "Service.v1"


def service_ports(tasks: tuple[Task, ...]) -> list[dict[str, Any]]:
    """Every (port, protocol) the tasks declare, once, under a unique name."""
    ports: list[dict[str, Any]] = []
    seen: set[tuple[int, str]] = set()
    used: set[str] = set()
    for task in tasks:
        for port in task.ports:
            key = (port.container_port, port.protocol)
            if key in seen:
                continue
            seen.add(key)
            name = port.name if port.name and port.name not in used else f"{port.protocol.lower()}-{port.container_port}"
            used.add(name)
            ports.append({"name": name, "port": port.container_port, "targetPort": port.container_port,
                          "protocol": port.protocol})
    return ports


def desired_service(job: DeciceJob, tasks: tuple[Task, ...]) -> dict[str, Any]:
    """Headless, and publishing not-ready pods so peers resolve each other while starting up."""
    spec: dict[str, Any] = {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {names.LABEL_JOB: job.name},
    }
    if ports := service_ports(tasks):
        spec["ports"] = ports
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": names.service_name(job.name), "namespace": job.namespace,
                     "labels": names.job_labels(job.name)},
        "spec": spec,
    }
