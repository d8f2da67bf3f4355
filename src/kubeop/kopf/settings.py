"""kopf's ``OperatorSettings``: the sections and fields a kopf operator sets, honoured on kubeop.

``settings.execution.default_backoff`` (a handler's retry delay when it gives no ``backoff=``),
``settings.execution.max_workers`` (workers per resource, 16 if unset), ``settings.persistence.finalizer``
and ``settings.peering`` (``standalone``, ``name``, ``namespace``: the Lease of kubeop's leader
election) change how kubeop runs the handlers; ``settings.admission.server`` (one of kopf's
webhook servers, :mod:`kubeop.kopf.webhooks`) and ``settings.admission.managed`` (the name of the
webhook configurations kubeop.kopf then writes) serve the admission handlers, checked when set.
The other kopf fields exist so that an operator setting them keeps working; their concern is
kubeop's own (watch timeouts, reconnect backoffs; events are posted by the handlers'
``kopf.info``/``warn``/``exception`` and on errors, never for every log line), and they are
accepted and not used (``execution.executor`` too: sync handlers run in asyncio's default
executor; ``queueing.batch_window`` and ``settings.batching`` warn as kopf's deprecated names do).
``persistence.progress_storage``/``diffbase_storage`` select kopf's storages of the handling state
(:mod:`kubeop.kopf.state`). A field kopf does not have is an
``AttributeError`` naming the section (the sections have slots), not a silent no-op.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import logging
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from kubeop.kopf.diffbase import AnnotationsDiffBaseStorage, DiffBaseStorage
from kubeop.kopf.progress import ProgressStorage, SmartProgressStorage

__all__ = [
    "AdmissionSettings",
    "ExecutionSettings",
    "NetworkingSettings",
    "OperatorSettings",
    "PeeringSettings",
    "PersistenceSettings",
    "PostingSettings",
    "QueueingSettings",
    "ScanningSettings",
    "WatchingSettings",
    "current_settings",
    "default_backoff",
    "reset_settings",
    "use_settings",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "OperatorSettings": "The fields that tune kopf's own watching, event posting and networking are "
    "accepted and have no effect (kubeop's client and informers do that work); a field kopf does "
    "not have raises AttributeError. Left unset, `persistence.progress_storage` and "
    "`diffbase_storage` are kopf's defaults except on a status-only write to an object that has "
    "none of kopf's annotations: the state then goes to kopf's status formats (`status.kopf`), in "
    "the same request, so a change costs one write instead of two. kopf's default reads the "
    "diff-base from annotations only, so such an object, moved back to kopf, has its creation "
    "handlers run again: set `kopf.AnnotationsDiffBaseStorage()` explicitly (used exactly as kopf "
    "uses it) to keep every object in kopf's default format.",
}


@dataclass(slots=True)
class PostingSettings:
    enabled: bool = True
    loggers: bool = False
    level: int = logging.INFO
    default_backoffs: tuple[float, ...] = (1, 1, 2, 3, 5, 8, 13, 21)
    logging_backoffs: tuple[float, ...] = (1, 1, 2, 3, 5)
    worker_limit: int | None = None
    idle_timeout: float = 1.0


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

    @property
    def namespaced(self) -> bool:
        """The opposite of ``clusterwide`` (kopf keeps the two in one flag)."""
        return not self.clusterwide

    @namespaced.setter
    def namespaced(self, value: bool) -> None:
        self.clusterwide = not value


@dataclass(slots=True)
class WatchingSettings:
    server_timeout: float | None = None
    client_timeout: float | None = None
    connect_timeout: float | None = None
    reconnect_backoff: float = 0.1
    inactivity_timeout: float = 70.0
    chunk_size: int | None = None
    initial_streaming: bool = False
    label_selectors: dict[str, Any] = field(default_factory=dict)
    field_selectors: dict[str, Any] = field(default_factory=dict)
    shard_selectors: dict[str, Any] = field(default_factory=dict)


_BATCHING = "Time-based event batching was removed."


@dataclass(slots=True)
class QueueingSettings:
    worker_limit: int | None = None
    idle_timeout: float = 5.0
    exit_timeout: float = 2.0
    error_delays: tuple[float, ...] = (1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610)
    _batch_window: float = field(default=0.1, repr=False)

    @property
    def batch_window(self) -> float:
        """Deprecated in kopf (kept, unused)."""
        warnings.warn(_BATCHING, DeprecationWarning, stacklevel=2)
        return self._batch_window

    @batch_window.setter
    def batch_window(self, value: float) -> None:
        warnings.warn(_BATCHING, DeprecationWarning, stacklevel=2)
        self._batch_window = value


@dataclass(slots=True)
class ScanningSettings:
    disabled: bool = False


@dataclass(slots=True)
class ExecutionSettings:
    default_backoff: float = 60.0
    max_workers: int | None = None
    executor: concurrent.futures.Executor = field(default_factory=concurrent.futures.ThreadPoolExecutor)


@dataclass(slots=True)
class NetworkingSettings:
    request_timeout: float | None = 5 * 60
    connect_timeout: float | None = None
    trust_env: bool = False


@dataclass(slots=True)
class PersistenceSettings:
    """``finalizer``, and kopf's ``progress_storage`` and ``diffbase_storage``: kopf's storages
    (:mod:`kubeop.kopf.progress`, :mod:`kubeop.kopf.diffbase`), by default kopf's defaults
    written where the cycle's write goes (:mod:`kubeop.kopf.state`); one set here is used as kopf does."""

    finalizer: str = "kopf.zalando.org/KopfFinalizerMarker"
    consistency_timeout: float = 5.0
    _progress_storage: ProgressStorage | None = field(default=None, repr=False)
    _diffbase_storage: DiffBaseStorage | None = field(default=None, repr=False)

    @property
    def progress_storage(self) -> ProgressStorage:
        return self._progress_storage if self._progress_storage is not None else DEFAULT_PROGRESS

    @progress_storage.setter
    def progress_storage(self, value: ProgressStorage) -> None:
        if not isinstance(value, ProgressStorage):
            raise TypeError(
                f"settings.persistence.progress_storage={value!r} is not a progress storage: use one of "
                "kopf.SmartProgressStorage(), kopf.AnnotationsProgressStorage(), "
                "kopf.StatusProgressStorage(), kopf.MultiProgressStorage([...]) or a subclass of "
                "kopf.ProgressStorage"
            )
        self._progress_storage = value

    @property
    def diffbase_storage(self) -> DiffBaseStorage:
        return self._diffbase_storage if self._diffbase_storage is not None else DEFAULT_DIFFBASE

    @diffbase_storage.setter
    def diffbase_storage(self, value: DiffBaseStorage) -> None:
        if not isinstance(value, DiffBaseStorage):
            raise TypeError(
                f"settings.persistence.diffbase_storage={value!r} is not a diff-base storage: use one "
                "of kopf.AnnotationsDiffBaseStorage(), kopf.StatusDiffBaseStorage(), "
                "kopf.MultiDiffBaseStorage([...]) or a subclass of kopf.DiffBaseStorage"
            )
        self._diffbase_storage = value


#: kopf's default storages (the settings read them unless one is set).
DEFAULT_PROGRESS = SmartProgressStorage()
DEFAULT_DIFFBASE = AnnotationsDiffBaseStorage()

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_managed_name(name: Any) -> None:
    """``settings.admission.managed``: the configurations' name, and the suffix of their webhooks'
    names (``<handler id>.<managed>``, which the API server wants with three DNS labels or more)."""
    fix = "use a lowercase DNS name with a dot, such as 'auto.kopf.dev'"
    if not isinstance(name, str):
        raise TypeError(f"settings.admission.managed={name!r}: a name (str) or None; {fix}")
    labels = name.split(".")
    if len(name) > 200 or len(labels) < 2 or not all(_DNS_LABEL.match(label) for label in labels):
        raise ValueError(
            f"settings.admission.managed={name!r} is not a valid webhook configuration name for "
            f"kopf's webhooks (<handler id>.{name}): {fix} (at most 200 characters)"
        )


def check_server(server: Any) -> None:
    """``settings.admission.server``: an instance of a server or tunnel (a callable of kopf's protocol)."""
    known = (
        "kopf.WebhookServer(), kopf.WebhookAutoServer(), kopf.WebhookK3dServer(), "
        "kopf.WebhookMinikubeServer()"
    )
    if isinstance(server, type):
        raise TypeError(
            f"settings.admission.server is the class {server.__name__}; give an instance: "
            f"settings.admission.server = kopf.{server.__name__}()"
        )
    if not callable(server):
        raise TypeError(
            f"settings.admission.server={server!r} is not a webhook server: give one of {known} "
            "(or a callable taking the admission function and yielding client configs, as in kopf)"
        )


@dataclass(slots=True)
class AdmissionSettings:
    """Where admission requests are served (``server``) and whether kubeop.kopf writes the
    Validating/MutatingWebhookConfiguration named ``managed`` (None: they are made elsewhere)."""

    server: Any = None
    managed: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "server" and value is not None:
            check_server(value)
        if name == "managed" and value is not None:
            check_managed_name(value)
        object.__setattr__(self, name, value)


@dataclass(slots=True)
class OperatorSettings:
    """kopf's settings object (``kopf.OperatorSettings()``, the ``settings`` kwarg of startup handlers)."""

    posting: PostingSettings = field(default_factory=PostingSettings)
    peering: PeeringSettings = field(default_factory=PeeringSettings)
    watching: WatchingSettings = field(default_factory=WatchingSettings)
    queueing: QueueingSettings = field(default_factory=QueueingSettings)
    scanning: ScanningSettings = field(default_factory=ScanningSettings)
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)
    networking: NetworkingSettings = field(default_factory=NetworkingSettings)
    persistence: PersistenceSettings = field(default_factory=PersistenceSettings)
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)

    @property
    def batching(self) -> QueueingSettings:
        """kopf's deprecated name of ``queueing``."""
        warnings.warn("Batching settings are now queueing settings.", DeprecationWarning, stacklevel=2)
        return self.queueing


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
