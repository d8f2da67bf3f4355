"""kopf's handler API on kubeop's runtime: move a kopf operator by changing its import.

    import kubeop.kopf as kopf

    @kopf.on.create("kopfexamples.kopf.dev")
    def create_fn(spec, logger, **_):
        logger.info(f"created with {spec}")
        return {"message": "hello"}          # -> status.create_fn.message

    kopf.run()

Handlers get kopf's kwargs and causes, filters, errors and retries (see :mod:`kubeop.kopf.on`);
they run on kubeop's runtime: one shared informer per resource, a level-based work queue, and
the handling state recorded with the handlers' patch in one write (see
:mod:`kubeop.kopf.processing`).
"""

import logging
from collections.abc import Mapping
from typing import Any

from kubeop.kopf import on
from kubeop.kopf.activities import ActivityError, ConnectionInfo, LoginError
from kubeop.kopf.admission import AdmissionError
from kubeop.kopf.bodies import Body, Meta, Patch, Spec, Status
from kubeop.kopf.diffs import Diff, DiffItem
from kubeop.kopf.errors import HandlerRetriesError, HandlerTimeoutError, PermanentError, TemporaryError
from kubeop.kopf.events import event, exception, info, warn
from kubeop.kopf.handlers import ABSENT, PRESENT, ErrorsMode, Reason
from kubeop.kopf.hierarchies import adopt, label
from kubeop.kopf.indexing import Index, Store, index
from kubeop.kopf.on import daemon, timer
from kubeop.kopf.processing import FINALIZER, Memo
from kubeop.kopf.registry import Registry, default_registry, get_default_registry, set_default_registry
from kubeop.kopf.running import build_manager, configure, operator, run
from kubeop.kopf.settings import OperatorSettings
from kubeop.kopf.spawning import DaemonStopped
from kubeop.kopf.subhandlers import register, subhandler
from kubeop.kopf.webhooks import (
    Headers,
    SSLPeer,
    UserInfo,
    WebhookAutoServer,
    WebhookAutoTunnel,
    WebhookClientConfig,
    WebhookClientConfigService,
    WebhookDockerDesktopServer,
    WebhookFn,
    WebhookK3dServer,
    WebhookMinikubeServer,
    WebhookNgrokTunnel,
    WebhookServer,
    WebhookServerProtocol,
)

Labels = Mapping[str, str]
"""The type of the ``labels`` kwarg (``kopf.Labels``)."""
Annotations = Mapping[str, str]
"""The type of the ``annotations`` kwarg (``kopf.Annotations``)."""
RawEvent = Mapping[str, Any]
"""The type of an event handler's ``event`` kwarg: ``{"type": ..., "object": ...}`` (``kopf.RawEvent``)."""
Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]
"""The type of the ``logger`` kwarg (``kopf.Logger``)."""

__all__ = [
    "ABSENT",
    "FINALIZER",
    "PRESENT",
    "ActivityError",
    "AdmissionError",
    "Annotations",
    "Body",
    "ConnectionInfo",
    "DaemonStopped",
    "Diff",
    "DiffItem",
    "ErrorsMode",
    "HandlerRetriesError",
    "HandlerTimeoutError",
    "Headers",
    "Index",
    "Labels",
    "Logger",
    "LoginError",
    "Memo",
    "Meta",
    "OperatorSettings",
    "Patch",
    "PermanentError",
    "RawEvent",
    "Reason",
    "Registry",
    "SSLPeer",
    "Spec",
    "Status",
    "Store",
    "TemporaryError",
    "UserInfo",
    "WebhookAutoServer",
    "WebhookAutoTunnel",
    "WebhookClientConfig",
    "WebhookClientConfigService",
    "WebhookDockerDesktopServer",
    "WebhookFn",
    "WebhookK3dServer",
    "WebhookMinikubeServer",
    "WebhookNgrokTunnel",
    "WebhookServer",
    "WebhookServerProtocol",
    "adopt",
    "build_manager",
    "configure",
    "daemon",
    "default_registry",
    "event",
    "exception",
    "get_default_registry",
    "index",
    "info",
    "label",
    "on",
    "operator",
    "register",
    "run",
    "set_default_registry",
    "subhandler",
    "timer",
    "warn",
]
