"""RFC 3339 timestamps as Kubernetes writes them (UTC, whole seconds)."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_time(value: object) -> datetime | None:
    """A Kubernetes timestamp, or None when absent or unreadable (never raises)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def format_time(value: datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def seconds_until(moment: datetime, now: datetime) -> float:
    return max((moment - now).total_seconds(), 0.0)
