"""Patch types and the content type each one is sent with.

- ``MERGE`` (RFC 7386): a partial object; ``None`` deletes a key; lists are replaced whole.
- ``JSON`` (RFC 6902): a list of operations; ``test`` makes it conditional, which is how finalizer
  edits avoid clobbering concurrent writers.
- ``STRATEGIC``: merge that knows list keys (containers by name...), built-in kinds only; the
  server answers 415 for custom resources.
- ``APPLY``: server-side apply. Needs a field manager; conflicts are 409 unless ``force``.
"""

from __future__ import annotations

import enum

__all__ = ["PatchType"]


class PatchType(enum.Enum):
    """The kinds of patch the API server takes, each its Content-Type: a JSON merge patch, a JSON patch, a
    strategic merge patch (built-in kinds only) or a server-side apply.
    """

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"

    @property
    def content_type(self) -> str:
        """The Content-Type header of this kind of patch."""
        return self.value
