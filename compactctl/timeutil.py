"""Timestamps as the canonical format writes them (RFC 3339, UTC, milliseconds, ``Z``)."""

from __future__ import annotations

import datetime as dt

__all__ = ["now_rfc3339"]


def now_rfc3339() -> str:
    """The current UTC time, e.g. ``2025-05-16T09:04:23.507Z``."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
