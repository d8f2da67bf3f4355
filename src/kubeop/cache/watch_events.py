"""What a watcher yields (:data:`WatcherEvent`) and the failures it detects itself (:class:`Error`).

Defined apart from :mod:`kubeop.cache.watcher` (which exports them) so that the watcher's state
machine (:mod:`kubeop.cache.watch_machine`) and its driver both build on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubeop.client.transport import ApiConnectionError

__all__ = [
    "Apply",
    "Delete",
    "Error",
    "Init",
    "InitApply",
    "InitDone",
    "VeryShortWatch",
    "WatchStalled",
    "WatcherEvent",
]

Obj = dict[str, Any]


@dataclass(slots=True)
class Init:
    """A (re)list starts: the ``InitApply`` events up to ``InitDone`` form the complete state."""


@dataclass(slots=True)
class InitApply:
    """An object of the (re)list in progress."""

    object: Obj


@dataclass(slots=True)
class InitDone:
    """The (re)list is complete; ``resource_version`` is the snapshot's."""

    resource_version: str


@dataclass(slots=True)
class Apply:
    """An object was added (``added=True``: a watch ADDED event) or modified."""

    object: Obj
    added: bool = False


@dataclass(slots=True)
class Delete:
    """An object was deleted; ``object`` is its last state."""

    object: Obj


#: What a :class:`Watcher` yields (``kubeop.cache.WatcherEvent``; not a Kubernetes Event, which is
#: ``kubeop.kinds.Event``).
WatcherEvent = Init | InitApply | InitDone | Apply | Delete


class Error(Exception):
    """Failures the watcher detects itself (all are retried; seen in logs and ``last_error``)."""


class WatchStalled(Error, ApiConnectionError):
    """No event and no bookmark for ``stall_timeout`` seconds: the connection is presumed dead."""


class VeryShortWatch(Error, ApiConnectionError):
    """The server closed a watch within a second, without sending anything."""
