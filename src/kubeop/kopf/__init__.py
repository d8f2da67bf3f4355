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

from kubeop.kopf import lifecycles, on
from kubeop.kopf.activities import ActivityError, AiohttpSession, ConnectionInfo, LoginError
from kubeop.kopf.admission import AdmissionError, Operation
from kubeop.kopf.bodies import (
    Body,
    BodyEssence,
    Meta,
    ObjectReference,
    OwnerReference,
    Patch,
    PatchFn,
    RawBody,
    RawEventType,
    Spec,
    Status,
    build_object_reference,
    build_owner_reference,
)
from kubeop.kopf.combinators import all_, any_, none_, not_
from kubeop.kopf.diffs import Diff, DiffItem, DiffOperation, FieldPath, FieldSpec
from kubeop.kopf.errors import HandlerRetriesError, HandlerTimeoutError, PermanentError, TemporaryError
from kubeop.kopf.events import event, exception, info, warn
from kubeop.kopf.handlers import ABSENT, PRESENT, ErrorsMode, HandlerId, Reason
from kubeop.kopf.hierarchies import (
    adjust_namespace,
    adopt,
    append_owner_reference,
    harmonize_naming,
    label,
    remove_owner_reference,
)
from kubeop.kopf.indexing import Index, Store, index
from kubeop.kopf.lifecycles import get_default_lifecycle, set_default_lifecycle
from kubeop.kopf.logins import (
    login_via_async_client,
    login_via_client,
    login_via_pykube,
    login_with_kubeconfig,
    login_with_service_account,
)
from kubeop.kopf.on import daemon, timer
from kubeop.kopf.processing import FINALIZER, LocalObjectLogger, Memo, ObjectLogger
from kubeop.kopf.registry import Registry, default_registry, get_default_registry, set_default_registry
from kubeop.kopf.resource import Resource
from kubeop.kopf.running import LogFormat, build_manager, configure, operator, run, run_tasks, spawn_tasks
from kubeop.kopf.selectors import EVERYTHING
from kubeop.kopf.settings import OperatorSettings
from kubeop.kopf.spawning import (
    AsyncDaemonStopperChecker,
    DaemonStopped,
    DaemonStoppingReason,
    SyncDaemonStopperChecker,
)
from kubeop.kopf.storage import (
    AnnotationsDiffBaseStorage,
    AnnotationsProgressStorage,
    DiffBaseStorage,
    MultiDiffBaseStorage,
    MultiProgressStorage,
    ProgressRecord,
    ProgressStorage,
    SmartProgressStorage,
    StatusDiffBaseStorage,
    StatusProgressStorage,
)
from kubeop.kopf.subhandlers import execute, register, subhandler
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
OperatorRegistry = Registry
"""kopf's name of the registry class (``kopf.OperatorRegistry()``)."""

__all__ = [
    "ABSENT",
    "EVERYTHING",
    "FINALIZER",
    "PRESENT",
    "ActivityError",
    "AdmissionError",
    "AiohttpSession",
    "Annotations",
    "AnnotationsDiffBaseStorage",
    "AnnotationsProgressStorage",
    "AsyncDaemonStopperChecker",
    "Body",
    "BodyEssence",
    "ConnectionInfo",
    "DaemonStopped",
    "DaemonStoppingReason",
    "Diff",
    "DiffBaseStorage",
    "DiffItem",
    "DiffOperation",
    "ErrorsMode",
    "FieldPath",
    "FieldSpec",
    "HandlerId",
    "HandlerRetriesError",
    "HandlerTimeoutError",
    "Headers",
    "Index",
    "Labels",
    "LocalObjectLogger",
    "LogFormat",
    "Logger",
    "LoginError",
    "Memo",
    "Meta",
    "MultiDiffBaseStorage",
    "MultiProgressStorage",
    "ObjectLogger",
    "ObjectReference",
    "Operation",
    "OperatorRegistry",
    "OperatorSettings",
    "OwnerReference",
    "Patch",
    "PatchFn",
    "PermanentError",
    "ProgressRecord",
    "ProgressStorage",
    "RawBody",
    "RawEvent",
    "RawEventType",
    "Reason",
    "Registry",
    "Resource",
    "SSLPeer",
    "SmartProgressStorage",
    "Spec",
    "Status",
    "StatusDiffBaseStorage",
    "StatusProgressStorage",
    "Store",
    "SyncDaemonStopperChecker",
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
    "adjust_namespace",
    "adopt",
    "all_",
    "any_",
    "append_owner_reference",
    "build_manager",
    "build_object_reference",
    "build_owner_reference",
    "configure",
    "daemon",
    "default_registry",
    "event",
    "exception",
    "execute",
    "get_default_lifecycle",
    "get_default_registry",
    "harmonize_naming",
    "index",
    "info",
    "label",
    "lifecycles",
    "login_via_async_client",
    "login_via_client",
    "login_via_pykube",
    "login_with_kubeconfig",
    "login_with_service_account",
    "none_",
    "not_",
    "on",
    "operator",
    "register",
    "remove_owner_reference",
    "run",
    "run_tasks",
    "set_default_lifecycle",
    "set_default_registry",
    "spawn_tasks",
    "subhandler",
    "timer",
    "warn",
]
