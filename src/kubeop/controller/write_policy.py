"""WritePolicy: what every write of a reconciler client must respect, fixed when the client is built.

Two rules, both set by the Manager before anything runs:

- ``guard``: called before every write; raising refuses it. Leader election fences writes with
  its lease (a leader that may have been replaced does not write); sharding with the shard's.
- ``labels``: labels to put on the objects a client creates, updates or applies (given the
  resource and the object; None: none). ``Sharding(labels=True)`` puts the shard label of a
  controller's children on them, so that the replica owning their owner caches them.

A policy is immutable: a client's rules do not change while it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.core.resource import ApiResource

__all__ = ["WritePolicy"]

Obj = dict[str, Any]
WriteGuard = Callable[[], None]
WriteLabels = Callable[[ApiResource, Obj], Mapping[str, str] | None]


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """Fencing and labels for a :class:`~kubeop.controller.ReconcilerClient`'s writes (see the module)."""

    guard: WriteGuard | None = None
    """Called before every write; raising refuses the write."""
    labels: WriteLabels | None = None
    """Labels to add to an object written by ``create``, ``update``, ``apply`` and the
    create-or-update helpers (given its resource and dict; None or empty: none)."""

    def fence(self) -> None:
        """Refuse the write about to be made if the guard says so (by raising)."""
        if self.guard is not None:
            self.guard()

    def labelled(self, res: ApiResource, body: Obj) -> Obj:
        """``body`` with the policy's labels (a copy down to its labels when they change
        anything: the caller's dict is not touched)."""
        labeller = self.labels
        if labeller is None:
            return body
        add = labeller(res, body)
        if not add:
            return body
        md = body.get("metadata") or {}
        labels = md.get("labels") or {}
        if all(labels.get(k) == v for k, v in add.items()):
            return body
        return {**body, "metadata": {**md, "labels": {**labels, **add}}}
