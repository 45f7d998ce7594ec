"""Tracking URIs as the farm prints and keeps them: without their password."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["hide_password"]


def hide_password(uri: str) -> str:
    """``uri`` with its password, if any, shown as ``***`` (to print it, or keep it on disk)."""
    password = urlsplit(uri).password
    return uri if password is None else uri.replace(f":{password}@", ":***@", 1)
