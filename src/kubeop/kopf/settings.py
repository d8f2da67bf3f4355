"""kopf's ``OperatorSettings``: the sections and fields a kopf operator sets, honoured on kubeop.

``settings.execution.default_backoff`` (a handler's retry delay when it gives no ``backoff=``),
``settings.execution.max_workers`` (the workers per resource), ``settings.persistence.finalizer``
and ``settings.peering`` (``standalone``, ``name``, ``namespace``: the Lease of kubeop's leader
election) change how kubeop runs the handlers. The other kopf fields exist so that an operator
setting them keeps working; their concern is kubeop's own (watch timeouts, reconnect backoffs;
events are posted by the handlers' ``kopf.info``/``warn``/``exception`` and on errors, never
for every log line), and they are accepted and not used. A field kopf does not have is an
``AttributeError`` naming the section (the sections have slots), not a silent no-op.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass, field

__all__ = [
    "ExecutionSettings",
    "NetworkingSettings",
    "OperatorSettings",
    "PeeringSettings",
    "PersistenceSettings",
    "PostingSettings",
    "WatchingSettings",
    "current_settings",
    "default_backoff",
    "reset_settings",
    "use_settings",
]


@dataclass(slots=True)
class PostingSettings:
    enabled: bool = True
    level: int = logging.INFO


@dataclass(slots=True)
class PeeringSettings:
    name: str = "default"
    namespace: str | None = None
    priority: int = 0
    lifetime: int = 60
    mandatory: bool = False
    standalone: bool = False
    clusterwide: bool = False
    stealth: bool = False


@dataclass(slots=True)
class WatchingSettings:
    server_timeout: float | None = None
    client_timeout: float | None = None
    connect_timeout: float | None = None
    reconnect_backoff: float = 0.1
    inactivity_timeout: float = 70.0


@dataclass(slots=True)
class ExecutionSettings:
    default_backoff: float = 60.0
    max_workers: int | None = None


@dataclass(slots=True)
class NetworkingSettings:
    request_timeout: float | None = 5 * 60
    connect_timeout: float | None = None


@dataclass(slots=True)
class PersistenceSettings:
    finalizer: str = "kopf.zalando.org/KopfFinalizerMarker"


@dataclass(slots=True)
class OperatorSettings:
    """kopf's settings object (``kopf.OperatorSettings()``, the ``settings`` kwarg of startup handlers)."""

    posting: PostingSettings = field(default_factory=PostingSettings)
    peering: PeeringSettings = field(default_factory=PeeringSettings)
    watching: WatchingSettings = field(default_factory=WatchingSettings)
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)
    networking: NetworkingSettings = field(default_factory=NetworkingSettings)
    persistence: PersistenceSettings = field(default_factory=PersistenceSettings)


_settings: contextvars.ContextVar[OperatorSettings | None] = contextvars.ContextVar(
    "kopf_settings", default=None
)
_DEFAULTS = OperatorSettings()


def current_settings() -> OperatorSettings:
    """The settings of the operator running in this context (the handlers' tasks inherit them)."""
    return _settings.get() or _DEFAULTS


def use_settings(settings: OperatorSettings) -> contextvars.Token[OperatorSettings | None]:
    """Make ``settings`` those of this context and the tasks it creates (reset with the token)."""
    return _settings.set(settings)


def reset_settings(token: contextvars.Token[OperatorSettings | None]) -> None:
    _settings.reset(token)


def default_backoff(backoff: float | None) -> float:
    """A handler's retry delay: its own ``backoff=``, else the settings' ``default_backoff``."""
    return backoff if backoff is not None else current_settings().execution.default_backoff
