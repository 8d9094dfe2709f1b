"""Realistic hook requests: a running DeciceJob whose observed Pods look like the API server's.

The observed pods carry what a real cluster returns: server-set metadata
(uid, resourceVersion, ownerReferences, managedFields of Metacontroller and the
kubelet), a spec with every default filled in (service-account volume,
tolerations, DNS policy …) and a status with conditions and container
statuses.  About 2 KB of JSON per pod.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

from hooks.sync import handle, render
from hooks.timeutil import format_time

NAMESPACE = "bench"
PARENT_UID = "8a0c3c55-3f1e-4c1e-9a52-5f8d2f0a1b00"
NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
CHILD_KEYS = ("Pod.v1", "PersistentVolumeClaim.v1", "Service.v1")


def job_manifest(replicas: int, name: str = "bench") -> dict:
    return {
        "apiVersion": "dev.decice.com/v1alpha1",
        "kind": "DeciceJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "backoffLimit": 6,
            "volumes": [{"name": "work", "size": "10Gi"}],
            "tasks": [{
                "name": "worker",
                "image": "registry.example/decice/worker:1.4.2",
                "command": ["python", "-m", "worker"],
                "replicas": replicas,
                "resources": {"cpu": "2", "memory": "4Gi"},
                "ports": [{"name": "rendezvous", "containerPort": 29500}],
                "volumeMounts": [{"volume": "work", "mountPath": "/work"}],
                "placement": {"nodes": [f"node-{i:04d}" for i in range(min(replicas, 500))]},
            }],
        },
    }


def _managed_fields(time: str) -> list[dict]:
    """Field ownership as the API server records it: Metacontroller's apply and the kubelet's status."""
    return [
        {"manager": "metacontroller", "operation": "Apply", "apiVersion": "v1", "time": time, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:affinity": {}, "f:containers": {}, "f:hostname": {},
                                                                 "f:restartPolicy": {}, "f:subdomain": {}, "f:volumes": {}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": time, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {},
                                   "f:podIP": {}, "f:startTime": {}}}, "subresource": "status"},
    ]


def observed_pod(desired: dict, index: int, created: datetime) -> dict:
    """``desired`` as the API server returns it once it runs."""
    pod = copy.deepcopy(desired)
    meta, spec = pod["metadata"], pod["spec"]
    stamp = format_time(created)
    started = format_time(created + timedelta(seconds=4))
    meta.update(
        uid=f"5f1c2d3e-{index:04d}-4a5b-8c9d-{index:012d}",
        resourceVersion=str(100000 + index),
        creationTimestamp=stamp,
        ownerReferences=[{"apiVersion": "dev.decice.com/v1alpha1", "kind": "DeciceJob", "name": "bench",
                          "uid": PARENT_UID, "controller": True, "blockOwnerDeletion": True}],
        managedFields=_managed_fields(stamp),
    )
    meta["labels"]["controller-uid"] = PARENT_UID
    container = spec["containers"][0]
    container.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log",
                     terminationMessagePolicy="File")
    container.setdefault("volumeMounts", []).append(
        {"name": "kube-api-access-x7k2p", "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})
    spec.setdefault("volumes", []).append({"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
    node = f"node-{index % 500:04d}"
    spec.update(dnsPolicy="ClusterFirst", serviceAccountName="default", serviceAccount="default", nodeName=node,
                securityContext={}, schedulerName="default-scheduler", terminationGracePeriodSeconds=30,
                priority=0, preemptionPolicy="PreemptLowerPriority", tolerations=[
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}])
    ip = f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
                       for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "hostIP": "192.168.10.20", "hostIPs": [{"ip": "192.168.10.20"}], "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": stamp, "qosClass": "Guaranteed",
        "containerStatuses": [{"name": "worker", "state": {"running": {"startedAt": started}}, "lastState": {},
                               "ready": True, "restartCount": 0, "image": container["image"],
                               "imageID": "registry.example/decice/worker@sha256:" + "ab" * 32,
                               "containerID": f"containerd://{index:064x}", "started": True}],
    }
    return pod


def sync_request(replicas: int) -> dict:
    """A hook request for a job whose ``replicas`` pods all run (the steady state)."""
    manifest = job_manifest(replicas)
    manifest["metadata"].update(uid=PARENT_UID, generation=1, resourceVersion="99",
                                creationTimestamp=format_time(NOW - timedelta(minutes=10)))
    created = NOW - timedelta(minutes=9)
    children: dict[str, dict] = {key: {} for key in CHILD_KEYS}
    for index, child in enumerate(render(manifest, NOW)):
        key = f"{child['kind']}.{child['apiVersion']}"
        obj = observed_pod(child, index, created) if key == "Pod.v1" else copy.deepcopy(child)
        if key == "PersistentVolumeClaim.v1":
            obj["status"] = {"phase": "Bound"}
        children[key][f"{NAMESPACE}/{obj['metadata']['name']}"] = obj
    request: dict[str, Any] = {"controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1",
                                              "kind": "CompositeController", "metadata": {"name": "decicejob-controller"}},
                               "parent": manifest, "children": children, "related": {}, "finalizing": False}
    manifest["status"] = handle(request, NOW)["status"]
    return request
