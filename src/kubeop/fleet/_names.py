"""Cluster names: what a fleet accepts as the name of a cluster (it appears in requests, log
lines, metrics labels and Events)."""

from __future__ import annotations

import re

__all__ = ["check_cluster_name"]

# A DNS-1123 label or subdomain-ish name, as Cluster API names clusters: no slashes, spaces,
# control characters or "..". (fullmatch: "$" alone would let a trailing newline through.)
_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")


def check_cluster_name(name: object, *, where: str) -> str:
    """``name`` if it is a usable cluster name; else ValueError naming ``where`` and the fix."""
    if not isinstance(name, str):
        raise TypeError(f"{where}: a cluster name must be a string, not {type(name).__name__}")
    if not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(
            f"{where}: cluster name {name[:80]!r} is not a DNS-1123 name (lower-case letters, digits, "
            "'-' and '.', at most 253 characters, starting and ending with a letter or digit)"
        )
    return name
