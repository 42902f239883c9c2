"""The default clock of the controller, its Events and its Leases, and the API's timestamps
(injected everywhere: tests pass their own)."""

from __future__ import annotations

import datetime as dt
from typing import Any


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def timestamp(now: dt.datetime) -> str:
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(value: Any) -> dt.datetime | None:
    """An API timestamp (RFC 3339, ``Z`` or an offset, MicroTime too) as an aware datetime; a
    datetime passes through (naive ones read as UTC); None when absent or unreadable."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
