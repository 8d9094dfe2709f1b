"""Job volumes: one PersistentVolumeClaim per owned volume, and their status.

A volume with ``existingClaim`` is mounted but never created, changed or
deleted: the job does not own it.  Owned claims are desired for as long as the
DeciceJob exists (TTL removes pods, never data); they go with the job.
"""

from __future__ import annotations

from typing import Any

from hooks import names
from hooks.model import DeciceJob
from hooks.runtimes.base import Children

PVC = "PersistentVolumeClaim.v1"
CLAIM_PHASES = ("Pending", "Bound", "Lost")


def desired_claims(job: DeciceJob) -> list[dict[str, Any]]:
    claims = []
    for volume in job.spec.volumes:
        if volume.existing_claim:
            continue
        spec: dict[str, Any] = {
            "accessModes": list(volume.access_modes),
            "resources": {"requests": {"storage": volume.size}},
        }
        if volume.storage_class_name is not None:
            spec["storageClassName"] = volume.storage_class_name
        claims.append({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": names.claim_name(job.name, volume.name),
                "namespace": job.namespace,
                "labels": {**names.job_labels(job.name), names.LABEL_VOLUME: volume.name},
            },
            "spec": spec,
        })
    return claims


def volume_status(job: DeciceJob, children: Children) -> list[dict[str, Any]]:
    """``status.volumes``: owned claims with the phase observed (Pending until the claim is seen);
    existing claims are listed with ``existingClaim: true`` and no phase, since the job does not
    observe them."""
    observed = children.get(PVC)
    observed = observed if isinstance(observed, dict) else {}
    by_name = {}
    for obj in observed.values():
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            by_name[meta["name"]] = obj
    out = []
    for volume in job.spec.volumes:
        if volume.existing_claim:
            out.append({"name": volume.name, "claimName": volume.existing_claim, "existingClaim": True})
            continue
        claim = names.claim_name(job.name, volume.name)
        status = by_name.get(claim, {}).get("status")
        phase = status.get("phase") if isinstance(status, dict) else None
        out.append({"name": volume.name, "claimName": claim, "phase": phase if phase in CLAIM_PHASES else "Pending"})
    return out
