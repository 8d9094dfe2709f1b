"""Small readers of a DeciceJob's status, for assertions."""

from __future__ import annotations


def phase(job: dict) -> str:
    return job["status"]["phase"]


def task_status(job: dict, name: str) -> dict:
    return next(t for t in job["status"]["tasks"] if t["name"] == name)


def condition(job: dict, kind: str) -> dict:
    return next(c for c in job["status"]["conditions"] if c["type"] == kind)


def names(objects: list[dict]) -> list[str]:
    return [o["metadata"]["name"] for o in objects]
