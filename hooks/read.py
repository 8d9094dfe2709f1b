"""Defensive readers of observed objects: Metacontroller relays whatever the API holds,
and a hook must never raise on a malformed child or status."""

from __future__ import annotations

from typing import Any


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_int(value: Any) -> int | None:
    """An int, or a string of digits (label values); None otherwise (booleans included)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
